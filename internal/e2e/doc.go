// Package e2e holds the end-to-end tests of the reference server: the mrtr
// binary is built once and run as `mrtr serve` on 127.0.0.1, then driven by
// the official MCP conformance harness and by MCP clients that nobody in this
// module wrote (go-sdk's, mark3labs/mcp-go's and the TypeScript SDK's), each
// through its own Multi Round-Trip Request loop.
//
// The package has no non-test code. The conformance and TypeScript tests need
// the pinned harness in conformance/node_modules (scripts/conformance-setup.sh);
// they skip without it unless MRTR_REQUIRE_CONFORMANCE=1, which installs it
// first and makes its absence a failure.
package e2e
