package observe_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/app/observe"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// BenchmarkGuardFlow is one pause and one resume through the guard (the
// in-memory store, no transport), without an Observer, with the metrics,
// and with metrics and every span sampled and batched to an exporter that
// drops it: what observability adds to the guard's own work per flow.
func BenchmarkGuardFlow(b *testing.B) {
	ring, err := reqstate.GenerateKeyRing("k1", nil)
	if err != nil {
		b.Fatal(err)
	}
	metrics := func() mrtr.Observer {
		m, err := observe.NewMetrics(prometheus.NewRegistry())
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	for _, bc := range []struct {
		name string
		obs  func() (mrtr.Observer, func())
	}{
		{"none", func() (mrtr.Observer, func()) { return nil, func() {} }},
		{"metrics", func() (mrtr.Observer, func()) { return metrics(), func() {} }},
		{"metrics+tracing", func() (mrtr.Observer, func()) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			return observe.Observers{metrics(), observe.NewTracer(tp)}, func() { tp.Shutdown(context.Background()) }
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			obs, stop := bc.obs()
			defer stop()
			g := mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: replay.NewMemory(nil), Observer: obs})
			r := &mrtr.Request{Method: "tools/call", ProtocolVersion: "2026-07-28", Target: "deploy",
				Arguments: []byte(`{"service":"api","env":"production"}`),
				Meta:      map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
			ctx := context.Background()
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				f, _ := g.Begin(ctx, r)
				tok, err := f.Pause(nil, "confirm")
				if err != nil {
					b.Fatal(err)
				}
				f.End(ctx, nil)
				rr := *r
				rr.RequestState = tok
				f, err = g.Begin(ctx, &rr)
				if err != nil {
					b.Fatal(err)
				}
				f.End(ctx, nil)
			}
			if cpu > 0 {
				// CPU time of all threads (the span batcher's too) per op.
				b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}
