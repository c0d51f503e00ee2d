// Package adaptertest is the guard's contract as a table of cases that
// every SDK adapter runs against a server of its own (gosdk's and mcpgo's
// contract tests call Run): tampering with every byte, a token moved to
// another tool, prompt, resource, caller, server id or protocol version,
// changed arguments, expiry, the round cap, replay and 32 concurrent
// resumes of which one runs, unasked answers dropped, the capability
// gate, a hand-set requestState refused, null inputResponses, inexact
// numbers in arguments, a store outage, prompts and resources, and no
// token in the logs.
//
// The suite speaks raw JSON-RPC over loopback HTTP (Client), so it checks
// the wire exactly as a client in any language sees it: codes, messages,
// data and HTTP statuses. Each adapter registers the same fixtures (see
// Start) in its own SDK's idiom.
package adaptertest
