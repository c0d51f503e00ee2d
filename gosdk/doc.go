// Package gosdk puts mrtr's sealed Multi Round-Trip Requests into servers
// built on the official Go SDK, github.com/modelcontextprotocol/go-sdk.
//
// Install adds the middleware to a server; AddTool, AddPrompt, AddResource
// and AddResourceTemplate register handlers that see a typed Flow instead
// of a raw requestState:
//
//	a := gosdk.Install(server, mrtr.New(reqstate.New(ring, nil), nil), nil)
//	gosdk.AddTool(a, &mcp.Tool{Name: "deploy"}, func(ctx context.Context, req *mcp.CallToolRequest,
//		args Deploy, flow *gosdk.ToolFlow[Deploy]) (*mcp.CallToolResult, error) {
//		st, resumed := flow.State() // sealed by the previous round, verified
//		if !resumed {
//			return flow.Ask(args, mcp.InputRequestMap{"confirm": &mcp.ElicitParams{...}})
//		}
//		ans, ok := flow.Elicited("confirm") // only keys the sealed round asked
//		if !ok {
//			return flow.Ask(st, ...) // a missing answer: ask again
//		}
//		...
//	})
//	http.Handle("/mcp", gosdk.NewHTTPHandler(server, nil))
//
// # What the adapter does for each call
//
// For tools/call, prompts/get and resources/read (and nothing else) it
// derives the binding from the request (method, the protocol version from
// _meta, the tool or prompt name or resource URI, the server id, and the
// caller from go-sdk's bearer-token TokenInfo), runs the guard's checks,
// and hands the handler a request stripped of requestState and
// inputResponses. Ask seals the next round. Rejections become the JSON-RPC
// errors of mrtr's error contract (-32602 with data.reason; -32603 for a
// single-use store outage); go-sdk answers them with HTTP 400 on the
// 2026-07-28 wire.
//
// # Capabilities
//
// Ask never sends an input request the client did not declare a
// capability for on this very request (elicitation and its form and url
// modes, sampling and sampling with tools, roots): it fails with -32021
// and data.requiredCapabilities instead. Handlers that can do without ask
// Flow.Supports first.
//
// # Older clients
//
// Clients on 2025-11-25 and before keep working: go-sdk's bridge answers
// the first pause through the session, and the adapter's middleware
// answers every further one, with the same handler code and the same
// sealed state. NewHTTPHandler serves both generations on one endpoint.
//
// # Tasks
//
// With Options.Tasks (a task.Manager over a memory or Redis store) the
// adapter serves the io.modelcontextprotocol/tasks extension (SEP-2663): it
// advertises it in server/discover, answers tasks/get, tasks/update and
// tasks/cancel, and a tool handler turns its call into a task with
// ToolFlow.RunTask, whose work reports its status (Task.SetStatus), asks
// for input inside the task (Task.Ask) and ends with a result or a tool
// error; tasks/cancel ends the work's context. A request that did not
// declare the extension is refused with -32021 before any lookup, never
// gets a task, and a task is found by (server, principal, id) only, so
// another caller's requests get what an unknown id gets. Example_task
// shows a task with an input round.
//
// # Mistakes it catches
//
// A handler (registered here or directly on the server) that sets a
// result's requestState itself gets a -32603 error instead of sending a
// plaintext state. inputResponses that are null or empty are a -32602
// protocol error.
package gosdk
