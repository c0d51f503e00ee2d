package bench

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var flowWarmup = flag.Duration("flow.warmup", 5*time.Second,
	"how long BenchmarkFlow runs every endpoint, round robin and untimed, before it times any")

// BenchmarkFlow runs one complete 2-round elicitation flow per op (a
// CallTool that go-sdk's client carries through both rounds: two HTTP
// POSTs, the elicitation answered in between) over loopback HTTP, for
// every FlowEndpoint. Allocations count both client and server.
//
// Every run of a sub-benchmark (each of -count N) starts a FlowServer of
// its own, serving all the endpoints on one mux, and collects garbage
// before timing. Sharing one server across runs made them unequal: the
// sealed endpoint's single-use store keeps every consumed id for the
// token's lifetime (60 s for an anonymous caller), so each run inherited
// the live heap of all the sealed runs before it, and with it a different
// garbage collection rate. gc/op reports that rate: go-sdk allocates about
// 1.5 MB per flow against a live heap of about 1 MB, so the collector runs
// every one or two flows and its cost is a large part of every op.
// cpu-ns/op is the CPU time (user and system, all threads: client, server,
// collector) per op; on a shared machine it moves less than the wall time,
// which also counts the time spent waiting for a core.
//
// go test runs the -count repetitions of each sub-benchmark back to back
// (sealed ×N, then sealed-nostore ×N, then plain ×N), so on a noisy
// machine a burst of load can land on one of them only; flow_interleaved.sh
// runs them interleaved instead.
//
// Before timing anything, BenchmarkFlow runs every endpoint round robin for
// -flow.warmup (5s by default; 0 skips it). Without that, the first
// sub-benchmark of a process paid for the process's start: in an A/A test
// with plain on all three endpoints, the first came out 0.96, 1.24, 1.36
// and 1.06 times the third in four runs of -count 5, and 0.92 to 1.16
// (mean 1.005) in six runs with the warm-up (docs/BENCHMARKS.md).
//
// Run: go test -run '^$' -bench Flow -count 10 (see docs/BENCHMARKS.md).
func BenchmarkFlow(b *testing.B) {
	benchFlow(b, FlowEndpoints, func() flowBed { return goSDKBed{NewFlowServer()} })
}

// flowBed is a flow server with clients of its SDK, as benchFlow drives
// them (go-sdk's here, mcp-go's for BenchmarkFlowMCPGo).
type flowBed interface {
	connect(ctx context.Context, path string) (flowClient, error)
	close()
}

// flowClient runs complete flows against one endpoint.
type flowClient interface {
	call(ctx context.Context) (string, error)
	close()
}

type goSDKBed struct{ *FlowServer }

func (g goSDKBed) connect(ctx context.Context, path string) (flowClient, error) {
	cs, err := g.Connect(ctx, path, FlowClientOptions(false))
	return goSDKClient{cs}, err
}

func (g goSDKBed) close() { g.Close() }

type goSDKClient struct{ *mcp.ClientSession }

func (c goSDKClient) call(ctx context.Context) (string, error) { return FlowCall(ctx, c.ClientSession) }
func (c goSDKClient) close()                                   { c.Close() }

// benchFlow is the method of the flow benchmarks: a warm-up of every
// endpoint of eps, then per sub-benchmark run a bed of its own, one untimed
// flow, garbage collected before timing, cpu-ns/op and gc/op reported.
func benchFlow(b *testing.B, eps []FlowEndpoint, newBed func() flowBed) {
	ctx := context.Background()
	if err := warmUpFlow(ctx, *flowWarmup, eps, newBed); err != nil {
		b.Fatal(err)
	}
	for _, ep := range eps {
		b.Run(ep.Name, func(b *testing.B) {
			bed := newBed()
			defer bed.close()
			c, err := bed.connect(ctx, ep.Path)
			if err != nil {
				b.Fatal(err)
			}
			defer c.close()
			// One untimed flow warms the connection and the caches.
			if got, err := c.call(ctx); err != nil || got != FlowWant {
				b.Fatalf("warm-up: %q, %v", got, err)
			}
			runtime.GC()
			b.ReportAllocs()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			gcs, cpu := ms.NumGC, processCPU()
			b.ResetTimer()
			for b.Loop() {
				got, err := c.call(ctx)
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

// warmUpFlow runs complete flows against every endpoint, round robin, on a
// bed of its own, for d.
func warmUpFlow(ctx context.Context, d time.Duration, eps []FlowEndpoint, newBed func() flowBed) error {
	if d <= 0 {
		return nil
	}
	bed := newBed()
	defer bed.close()
	var clients []flowClient
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	for _, ep := range eps {
		c, err := bed.connect(ctx, ep.Path)
		if err != nil {
			return err
		}
		clients = append(clients, c)
	}
	for start := time.Now(); time.Since(start) < d; {
		for _, c := range clients {
			if got, err := c.call(ctx); err != nil || got != FlowWant {
				return fmt.Errorf("warm-up: %q, %v", got, err)
			}
		}
	}
	return nil
}
