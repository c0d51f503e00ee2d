// Package serve is mrtr serve: the reference MCP server, with the demo
// tools that ask for input, on a node (package node).
package serve
