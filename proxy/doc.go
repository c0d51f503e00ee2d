// Package proxy is mrtr's sealing reverse proxy: an http.Handler in front
// of any Streamable HTTP MCP server (the upstream), in any language, that
// makes its Multi Round-Trip Requests safe without changing it.
//
// # What it does
//
// An input_required result of tools/call, prompts/get or resources/read
// (plain JSON, or the final event of the per-POST event stream) leaves
// the proxy with an mrtr token as its requestState. The token is sealed
// by the Guard (AES-256-GCM; bound to method, protocol version, tool name
// or URI, server id and principal; expiring; hashing the arguments) and
// carries, in its continuation, the upstream's own requestState as the
// JSON string the upstream sent ({"s": <state>}; nothing when it sent
// none) and, as the sealed round's asked keys, the keys of inputRequests.
// The client never sees the upstream's state.
//
// A retry carrying requestState is checked by the guard exactly as
// Guard.Begin checks it (length cap, format, key id, authenticated
// decryption under this request's binding, expiry, arguments hash, round
// cap, single-use reservation), with the same error contract (-32602
// "invalid requestState" with data.reason; -32603 when the single-use
// store cannot decide), before anything reaches the upstream. The
// upstream then receives its own requestState byte for byte (none if it
// sent none) and only the answers to the keys it asked. A requestState
// the proxy did not seal is invalid. A call that carries no requestState
// (or null, or "") is a first call: it reaches the upstream without
// requestState and without inputResponses, whatever the client sent, so
// the upstream never runs a resume the guard did not check. As in the
// adapters, inputResponses that are not an object of answers (null, {},
// anything else) are refused with -32602 before the upstream sees them.
//
// With a single-use store, a token is spent once its resume has been sent
// to the upstream: the upstream may have run the call, so a client that
// hangs up, a timeout, a dropped connection or an unreadable, oversized
// or refused answer all leave it spent, and sending it again is refused
// as replayed. It is released, so the user may retry with the same state,
// only when the upstream provably did not run the call: the request never
// left the proxy (no byte of its body was read by the transport; -32603
// "upstream unavailable: the call was not delivered"), or the upstream
// answered with a JSON-RPC error, as a handler error releases its token
// in a Go server.
//
// An input request the client did not declare a capability for on this
// request (its _meta clientCapabilities) is not passed on: the client
// gets -32021 with data.requiredCapabilities (HTTP 400).
//
// Everything else passes through unchanged and streamed: other methods,
// notifications and server-to-client requests inside event streams (each
// event flushed as it arrives), 2025-11-25 sessions (initialize,
// Mcp-Session-Id, the GET stream, DELETE), subscriptions/listen.
//
// # Responses belong to their request
//
// Every request goes to the upstream under a JSON-RPC id of the proxy's
// own, new for each request, and its response comes back with the caller's
// id byte for byte (1 stays 1, "1" stays "1"). A response with any other
// id (a stray one on a kept-alive connection, a batch, a second response
// in a stream) never reaches the caller, who gets -32603 with its own id,
// and the connection it came on is closed; an error with a null id becomes
// the proxy's -32603. The id is checked before an input_required is
// sealed. Server-to-client requests keep the server's ids and the caller's
// answers to them pass as they are; a caller's notifications/cancelled is
// passed on, naming the id its request was sent under, only while a
// request of that principal and session with that id is in flight; a
// listen stream's subscriptionId is the caller's id again; progress tokens
// are untouched. A JSON response is held whole (up to 64 MiB) to check it.
//
// # HTTP methods
//
// POST carries every MCP message and is read and checked as above. GET,
// HEAD, DELETE and OPTIONS (a 2025-11-25 session's GET stream and DELETE,
// what HTTP clients and browsers send on their own) pass through
// unchanged and without a body: one that carries a body (a non-zero or
// unknown Content-Length) is refused with 400, since the proxy would
// forward it unread. Every other method (PUT, PATCH, ...) is answered with
// 405 and an Allow header, and never reaches the upstream.
//
// # Limits
//
// Memory per request is bounded. A client body is capped by MaxBodyBytes.
// Responses are streamed; the proxy holds only the final message of a
// pausable call (it must see all of it to seal its requestState), and any
// single event of such a call's stream, up to MaxHeldBytes (default 4
// MiB): a larger one is answered with -32603. The upstream's own
// requestState may be up to MaxUpstreamState bytes (default 16 KiB, its
// JSON string as sent, quotes and escapes included); a larger one is
// answered with -32603 naming the limit, never truncated. Batches (JSON
// arrays) are refused with 400; neither 2025-11-25 nor 2026-07-28 has them.
//
// # Failures
//
// An upstream that is unreachable, too slow (UpstreamTimeout, except on
// long-lived streams), drops the connection or answers garbage gets the
// caller a JSON-RPC -32603 error with the caller's id (inside the event
// stream when one had started) and a log line naming the cause. Its
// message says whether the call reached the upstream: "upstream
// unavailable: the call was not delivered" (the token was released) or
// "upstream failed after the call was sent" (the token is spent: start the
// call over). An upstream answering with an HTTP error status is relayed
// as is.
//
// # Replicas
//
// An upstream that holds paused calls in process (the bridge of a
// 2025-11-25 upstream) ties each resume to one proxy. With Options.Peers,
// a resume is first checked by a guard without a store (every check but
// single use: a bad token is refused where it arrives), Peers.Locate names
// the replica holding its call, and the client's request goes there as
// received, marked with ForwardedHeader, its answer streamed back; the
// holder checks it again and alone reserves the token. A request that
// carries ForwardedHeader is never forwarded again. A holder that is gone
// (ErrHolderGone, a refused connection, or one that drops out of the
// directory while a forwarded resume waits) is -32603 telling the client
// to start the call over.
//
// # Tasks
//
// In front of an upstream that implements tasks (the
// io.modelcontextprotocol/tasks extension, SEP-2663), each task is bound
// to the caller that created it. The upstream's task id never reaches the
// caller: a CreateTaskResult (resultType "task", JSON or in the call's
// event stream) leaves with a task id of the proxy's, the upstream's id
// encrypted and authenticated under the caller's principal, the guard's
// server id and the upstream (its URL's scheme, host and path), with the
// key ring the guard seals requestState with (Options.TaskRing); so does
// a CreateTaskResult answering any other method. The
// seal is deterministic (a synthetic IV, see taskid.go), so the caller
// sees the same string in the CreateTaskResult, in every tasks/get
// result and in every notification naming the task. It is at most
// MaxTaskIDLen characters (an upstream id longer than MaxUpstreamTaskID
// is answered with -32603), carries no expiry of its own (the task's
// life is the upstream's; an id opens while its key is in the ring,
// whatever that key's sealing window, so keep a retired key as long as
// the longest task may live) and never enters the single-use store.
//
// A tasks/get, tasks/update or tasks/cancel reaches the upstream only
// when its taskId opens under the caller's own binding, and then with
// the upstream's id in params.taskId and in Mcp-Name, everything else
// (inputResponses included: the upstream owns its keys) as the client
// sent it; the upstream's answer goes back with the caller's id in
// result.taskId. Another caller's id, a forged, truncated or over-long
// one, or one sealed in front of another upstream or under another
// server id gets what the upstream gives an unknown task, -32602
// task.UnknownMessage (HTTP 400), or -32021 when the request does not
// declare the extension (the upstream's gate comes before any lookup),
// and nothing reaches the upstream. A task request without an id is
// refused (400). Nothing of a task is kept by the proxy: replicas sharing
// the ring serve each other's tasks, whichever created them.
//
// A subscriptions/listen request reaches the upstream naming in
// params.notifications.taskIds the caller's own tasks by the upstream's
// ids and "" in place of every other entry (so the upstream's -32021
// gate still applies); on its stream the acknowledgement lists only the
// caller's ids, and a notifications/tasks naming a task the caller did
// not list is dropped. A notifications/tasks in a tools/call's own event
// stream names the task as its CreateTaskResult does.
//
// # Headers and security
//
// The client's headers reach the upstream as sent, so
// MCP-Protocol-Version, Mcp-Method and Mcp-Name stay consistent with the
// body the upstream receives (the proxy changes only requestState and
// inputResponses in it, which no header mirrors, and a task request's
// taskId, whose Mcp-Name it sets to match). The proxy checks them
// itself on every POST that has them: one that is present and disagrees
// with the body is refused with -32020 (HTTP 400, the request's id)
// before anything reaches the upstream, so an upstream that routes on
// headers cannot run what the proxy did not check. Mcp-Method must be the
// body's method; Mcp-Name must be params.name (tools/call, prompts/get),
// params.uri (resources/read) or params.taskId (tasks/*), on any other
// method params.name or else params.uri, and matches nothing on a body
// without that member; MCP-Protocol-Version must equal the body's
// _meta protocol version when it has one. A header sent twice never
// matches; values in the spec's =?base64?...?= form are decoded first;
// absent headers are not judged (older clients send none).
//
// Hop-by-hop headers are dropped, and so is Authorization unless
// ForwardAuthorization is set: per the MCP authorization guidance, a
// token issued to the proxy must not be passed through to another
// resource. Authenticate callers in front of the Handler and report them
// through Options.Principal.
//
// Forwarding headers follow one rule on every path (a checked call, a
// resume, a passed-through POST, a GET): the client's Forwarded,
// X-Forwarded-* and X-Real-Ip are dropped, and the proxy sets
// X-Forwarded-For (the connection's peer address), X-Forwarded-Host (the
// request's Host) and X-Forwarded-Proto itself, as
// httputil.ProxyRequest.SetXForwarded does. An upstream may trust them as
// far as it trusts the proxy; a proxy behind another reverse proxy
// reports that one's address, not the client's.
//
// The upstream sees the proxy's Host, so it can no longer protect a
// loopback deployment against DNS rebinding: the proxy does, refusing
// (403) a request that arrives on a loopback address with a Host or
// Origin that does not name a loopback host or one of AllowedHosts.
//
// Logs carry reasons, methods, targets and (from the guard) a short token
// fingerprint, never a token or the upstream's state.
//
// The proxy reads only what it must of each JSON-RPC message and imports
// no MCP SDK (package internal/mcpwire splits JSON objects into raw
// members after one validation pass, agreeing with encoding/json). Member
// names are matched exactly, and a client message whose envelope or
// params repeat a member name, or carry one that equals a protocol
// member's name only under case folding (encoding/json, and so mcp-go,
// matches names that way), is refused (400, -32600, naming the request's
// id when the envelope itself was sound), so the upstream cannot read a
// message the proxy judged differently; a message the proxy does
// not change is forwarded as received, one it changes (a resume) is
// encoded again from what it parsed.
package proxy
