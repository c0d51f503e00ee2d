package bench

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
)

// BenchmarkFlowMCPGo is BenchmarkFlow on mark3labs/mcp-go: one complete
// 2-round elicitation flow per op (a CallTool that mcp-go's client carries
// through both rounds) over loopback HTTP, for every FlowEndpoint served
// by an MCPGoFlowServer, with the same method: a warm-up of every endpoint
// round robin for -flow.warmup, a server of its own per run, one untimed
// flow, garbage collected before timing, cpu-ns/op and gc/op reported.
//
// Run: go test -run '^$' -bench FlowMCPGo -count 5 (see docs/BENCHMARKS.md).
func BenchmarkFlowMCPGo(b *testing.B) {
	ctx := context.Background()
	if err := warmUpMCPGoFlow(ctx, *flowWarmup); err != nil {
		b.Fatal(err)
	}
	for _, ep := range FlowEndpoints {
		b.Run(ep.Name, func(b *testing.B) {
			fs := NewMCPGoFlowServer()
			defer fs.Close()
			c, err := fs.Connect(ctx, ep.Path)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if got, err := MCPGoFlowCall(ctx, c); err != nil || got != FlowWant {
				b.Fatalf("warm-up: %q, %v", got, err)
			}
			runtime.GC()
			b.ReportAllocs()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			gcs, cpu := ms.NumGC, processCPU()
			b.ResetTimer()
			for b.Loop() {
				got, err := MCPGoFlowCall(ctx, c)
				if err != nil {
					b.Fatal(err)
				}
				if got != FlowWant {
					b.Fatalf("got %q, want %q", got, FlowWant)
				}
			}
			if cpu > 0 {
				b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
			}
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(ms.NumGC-gcs)/float64(b.N), "gc/op")
		})
	}
}

// warmUpMCPGoFlow runs complete flows against every endpoint, round robin,
// on a server of its own, for d.
func warmUpMCPGoFlow(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	fs := NewMCPGoFlowServer()
	defer fs.Close()
	var clients []*client.Client
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for _, ep := range FlowEndpoints {
		c, err := fs.Connect(ctx, ep.Path)
		if err != nil {
			return err
		}
		clients = append(clients, c)
	}
	for start := time.Now(); time.Since(start) < d; {
		for _, c := range clients {
			if got, err := MCPGoFlowCall(ctx, c); err != nil || got != FlowWant {
				return fmt.Errorf("warm-up: %q, %v", got, err)
			}
		}
	}
	return nil
}
