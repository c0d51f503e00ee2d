// Package testcmd is what the tests of mrtr's commands share: running a
// command line in-process (main's dispatcher in cmd/mrtr, one command's
// in that command's package) with a bound on its time, starting a serve
// or a proxy on a free port and reading its log, one JSON-RPC request
// with the 2026-07-28 headers, and this test binary as an MCP server over
// stdio or as mrtr's supervisor (Init, from TestMain).
package testcmd
