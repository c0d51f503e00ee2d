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
