// Package mcpwire reads the few parts of raw MCP JSON that mrtr's
// SDK-free code needs: JSON objects split into raw members (Object, one
// validation pass and one split pass, agreeing with encoding/json on every
// input), what a client declared it can answer (the clientCapabilities of
// a request's _meta), which capability an input request needs, and the
// -32021 error data naming what is missing; and Shown, the cap on a
// request's strings (a tool name, a resource URI) in a log line or a span.
//
// It knows nothing of any MCP SDK: it works on encoding/json values, so
// the sealing proxy, an adapter for go-sdk or one for mcp-go can share one
// definition of the capability gate of MCP 2026-07-28 (mrtr.mdx, "Server
// Requirements" 5): no elicitation/create without elicitation, no URL
// mode without elicitation.url (an empty elicitation object means form
// only), no sampling without sampling, no sampling tools without
// sampling.tools, no roots/list without roots.
//
// Every function accepts untrusted input: malformed JSON declares nothing
// and asks for nothing it can name; nothing panics.
package mcpwire
