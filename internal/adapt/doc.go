// Package adapt is what mrtr's SDK adapters (gosdk for the official
// go-sdk, mcpgo for mark3labs/mcp-go) share, so it exists once: the call
// as the guard sees it (Call, Begin, Run), the typed view of a flow a
// handler gets (Flow, Pause), the record that tells a sealed requestState
// from one a handler wrote by hand (Record), the capability gate over
// mcpwire (Gate), and the error contract's JSON-RPC errors (Wire).
//
// It knows no SDK: an adapter reads its SDK's request into a Call, turns
// its typed input requests into mcpwire.Needs and maps a WireError to its
// SDK's error type.
package adapt
