package bench

import (
	"context"
	"testing"

	"github.com/mark3labs/mcp-go/client"
)

// BenchmarkFlowMCPGo is BenchmarkFlow on mark3labs/mcp-go: one complete
// 2-round elicitation flow per op (a CallTool that mcp-go's client carries
// through both rounds) over loopback HTTP, for every MCPGoFlowEndpoint served
// by an MCPGoFlowServer, with BenchmarkFlow's method (benchFlow).
//
// Run: go test -run '^$' -bench FlowMCPGo -count 5, or
// FLOW_BENCH=BenchmarkFlowMCPGo ./flow_interleaved.sh (docs/BENCHMARKS.md).
func BenchmarkFlowMCPGo(b *testing.B) {
	benchFlow(b, MCPGoFlowEndpoints, func() flowBed { return mcpgoBed{NewMCPGoFlowServer()} })
}

type mcpgoBed struct{ *MCPGoFlowServer }

func (m mcpgoBed) connect(ctx context.Context, path string) (flowClient, error) {
	c, err := m.Connect(ctx, path)
	return mcpgoClient{c}, err
}

func (m mcpgoBed) close() { m.Close() }

type mcpgoClient struct{ *client.Client }

func (c mcpgoClient) call(ctx context.Context) (string, error) { return MCPGoFlowCall(ctx, c.Client) }
func (c mcpgoClient) close()                                   { c.Close() }
