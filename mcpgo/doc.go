// Package mcpgo puts mrtr's sealed Multi Round-Trip Requests into servers
// built on github.com/mark3labs/mcp-go (v1.2.1). It is a module of its
// own, so a go-sdk user never fetches mcp-go.
//
// Install adds the adapter to a server; AddTool, AddPrompt, AddResource
// and AddResourceTemplate register handlers that see a typed Flow instead
// of a raw requestState; NewHTTPHandler (or Handler around your own
// StreamableHTTPServer) serves it:
//
//	s := server.NewMCPServer("deployer", "1.0.0", server.WithToolCapabilities(false))
//	a := mcpgo.Install(s, mrtr.New(reqstate.New(ring, nil), nil), nil)
//	mcpgo.AddTool(a, mcp.NewTool("deploy", mcp.WithString("service"), mcp.WithString("env")),
//		func(ctx context.Context, req mcp.CallToolRequest, args Deploy, flow *mcpgo.ToolFlow[Deploy]) (*mcp.CallToolResult, error) {
//			st, resumed := flow.State() // sealed by the previous round, verified
//			if !resumed {
//				return flow.Ask(args, mcp.InputRequests{"confirm": mcp.NewElicitationInputRequest(...)})
//			}
//			ans, ok := flow.Elicited("confirm") // only keys the sealed round asked
//			if !ok {
//				return flow.Ask(st, ...) // a missing answer: ask again
//			}
//			...
//		})
//	http.Handle("/mcp", mcpgo.NewHTTPHandler(a))
//
// # What the adapter does for each call
//
// For tools/call, prompts/get and resources/read it derives the binding
// from the request (method, the protocol version mcp-go reports for it,
// the tool or prompt name or resource URI, the server id, and the caller:
// Options.Principal, by default what WithPrincipal put into the context),
// runs the guard's checks, and hands the handler a request stripped of
// requestState and inputResponses. Ask seals the next round behind the
// capability gate (-32021 with data.requiredCapabilities for an input
// request the client did not declare).
//
// # Where mcp-go has no seam
//
// mcp-go sends every handler error as JSON-RPC -32603 with the error's
// text, and its resource handlers return contents, not results. Handler
// fills both gaps without forking mcp-go: it rewrites the adapter's errors
// into the error contract's exact JSON-RPC errors (-32602 with
// data.reason for a rejected requestState, -32603 for a store outage,
// -32021, -32602 for arguments the hash refuses and for null
// inputResponses) with HTTP 400 where mcp-go gives those codes 400, and
// it carries a resource's pause to the adapter's hook, which turns the
// read's result into the input_required result. mcp-go also decodes
// "inputResponses": null as absent; Handler reads it from the body.
//
// # Tasks
//
// With Options.Tasks (a task.Manager over a memory or Redis store) the
// adapter serves the io.modelcontextprotocol/tasks extension (SEP-2663) to
// 2026-07-28 clients: it advertises it in server/discover, answers
// tasks/get, tasks/update and tasks/cancel, and a tool handler turns its
// call into a task with ToolFlow.RunTask (TTL, poll interval, first
// status), whose work reports its status (Task.SetStatus), asks for input
// inside the task (Task.Ask: elicitation, sampling, roots, several keys at
// once, answered through tasks/update on any replica) and ends with a
// result, a tool error (an isError result) or an error (a failed task);
// tasks/cancel ends the work's context. A request that did not declare the
// extension is refused with -32021 before any lookup and never gets a task
// (ToolFlow.TasksDeclared tells a tool that can run either way); a task is
// found by (server, principal, id) only, so another caller's requests get
// exactly what an unknown id gets. The principal is Options.Principal's,
// read in the context mcp-go's HTTP context functions made, as for a
// paused call.
//
// mcp-go has no seam for a method of its own, so tasks need Handler:
// Handler checks a tasks/* request's Mcp-Method and Mcp-Name headers (HTTP
// 400, -32020), the adapter answers it from an OnRequestInitialization
// hook once mcp-go validated it, and Handler puts the answer (and a task's
// CreateTaskResult in place of its tool's placeholder result) on the wire.
// Without Handler, RunTask fails and mcp-go answers tasks/* as it does
// without the adapter. Clients older than 2026-07-28, mcp-go's own
// 2025-11-25 tasks included, are left to mcp-go. Example_task shows a task
// with an input round.
//
// # Older clients
//
// Clients on 2025-11-25 and before go through mcp-go's own legacy bridge:
// it answers each pause of a tool or prompt with real elicitation,
// sampling and roots requests on the session and calls the handler again
// with the answers and the sealed state, round after round. The adapter
// does the same for resources, which the bridge does not cover.
//
// # Mistakes it catches
//
// A tool or prompt handler (registered here or directly on the server)
// that sets a result's requestState itself gets a -32603 error instead of
// sending a plaintext state.
package mcpgo
