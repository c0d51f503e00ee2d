// Package bridge serves MCP 2026-07-28 requests from a 2025-11-25
// ("legacy") upstream: a server that asks for input with server-to-client
// requests (elicitation/create, sampling/createMessage, roots/list) in the
// middle of a call instead of ending the call with input_required.
//
// A Bridge is an http.RoundTripper that the sealing proxy uses as its
// transport: it behaves like a modern MCP server. A pausable call
// (tools/call, prompts/get, resources/read) runs inside a legacy session
// the bridge holds open with the upstream. When the upstream sends
// requests during the call, the call's answer is input_required: those
// requests as inputRequests, and a requestState naming the held call
// (a random hold id and the round). The proxy seals that state like any
// upstream's, so the guard checks the retry (binding, expiry, arguments,
// rounds, single use) before the bridge sees it; the bridge then answers
// the upstream's requests with the client's inputResponses and relays on
// to the final result or the next round.
//
// Isolation: a server-to-client request carries no reliable link to the
// call it belongs to, so one session serves one call at a time, and
// sessions are never shared between callers (principals; all anonymous
// callers are one). Idle sessions of the same caller are reused; a warm
// session (Options.Warm), initialized for no caller yet, becomes the
// caller's that takes it. Options.MaxSessions bounds the sessions of all,
// Options.MaxSessionsPerCaller those of one caller.
// Requests the upstream sends while no call is in flight on its session
// are answered by the bridge: roots/list with the configured roots, ping
// with an empty result, anything else with -32601.
//
// Roots belong to the operator: a 2025-11-25 server takes the answer to
// roots/list as the boundary of what it may touch (server-filesystem
// replaces its allowed directories with it), and the answer lives on in
// the session, which later calls of the same caller reuse. The callers
// are remote, so by default the bridge answers every roots/list itself,
// in a call or outside one, with Options.Roots; only
// Options.RootsFromClient lets a caller answer one, as a sealed round.
//
// The bridge trusts the requestState it receives: only the proxy, after
// the guard verified the client's token, hands it one. It must never be
// reachable by clients in any other way.
package bridge
