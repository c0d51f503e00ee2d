// Package task gives MCP servers tasks (the io.modelcontextprotocol/tasks
// extension, SEP-2663, MCP 2026-07-28) with the guarantees mrtr gives a
// paused call: a tool call turns into a task the client polls (tasks/get),
// answers (tasks/update) and cancels (tasks/cancel), on any replica.
//
// The package is SDK-agnostic: a [Manager] runs tasks over a [Store] and
// serves the three methods on JSON; the adapters (package gosdk:
// Options.Tasks, ToolFlow.RunTask) decode requests, gate them and derive
// the caller. Stores: [Memory] for one node, package redistask for many.
//
// # What holds
//
//   - Binding: a task is found by its whole [Key] (server, principal, id)
//     in one lookup, on every path. Another principal's or another
//     server's request for the same id is the request for a task that
//     does not exist: the same error (-32602, [UnknownMessage]) as an
//     unknown or expired id. All anonymous callers are one principal, for
//     whom the id is a bearer capability, as the extension allows.
//   - Ids: [IDBytes] bytes of crypto/rand (192 bits), base64url.
//   - Durable creation: Start returns the CreateTaskResult only after the
//     store's Create returned, which on Redis means acknowledged under the
//     replay store's rules.
//   - Terminal states only by compare-and-set: a task completes, fails or
//     is cancelled once; the loser of a race (the work finishing as the
//     client cancels) changes nothing.
//   - Leases: the node running a task holds a lease it renews every
//     Options.Watch; a lapsed lease turns the task failed (by
//     compare-and-set, at the next lookup on any node), and the old owner
//     can no longer write it.
//   - Input inside a task: each input request key is used once in a task's
//     life; an answer is taken once, atomically, and only for a key that
//     is outstanding and only when it has the shape of a response to that
//     request; answers to keys never asked, already answered or dropped
//     are ignored, as the extension says. The node running the task
//     collects answers delivered to any node (at once on its own, every
//     Options.AnswerPoll from others).
//   - Cancellation: tasks/cancel turns a task cancelled at once and ends its
//     work's context, at once on the node that runs it and at its next
//     watch from another node.
//   - Bounds: a Memory store holds at most MaxTasks; every task expires
//     with its TTL (capped by Options.MaxTTL); a Manager runs at most
//     Options.MaxRunning at once.
//   - Observability: Options.Observer is told of every task created, input
//     asked, answers taken, end, cancellation and refused request, as the
//     guard's mrtr.Observer is of pauses and resumes (package audit and the
//     command's metrics and spans implement it). Adapters describe the
//     request with WithCall. Events carry the task id, a bearer capability
//     for anonymous callers: an Observer records it only under a MAC.
//
// What the package does not do: notifications/tasks on subscriptions/listen
// (optional in the extension), and tasks on methods other than tools/call.
package task
