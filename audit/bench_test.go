package audit_test

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/audit"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// BenchmarkGuardFlow is one pause and one resume through the guard (the
// in-memory store, no transport), as go-sdk's adapter drives it (a typed
// elicitation answer), without a trail, with one written to io.Discard
// (the Writer's own work: encoding, the digest and line MACs, the
// link), and with one appended to a file (the same plus three write(2)
// calls a flow): what the audit trail adds per flow. The HTTP flow it is
// part of is BenchmarkFlow in bench/ (sealed and sealed-audited).
func BenchmarkGuardFlow(b *testing.B) {
	ring := testRing(b)
	for _, bc := range []struct {
		name string
		w    func(codec *reqstate.AESGCM) mrtr.Auditor
	}{
		{"off", func(*reqstate.AESGCM) mrtr.Auditor { return nil }},
		{"discard", func(c *reqstate.AESGCM) mrtr.Auditor {
			return audit.NewWriter(io.Discard, "", &audit.Options{Keys: c.KeyRing, Node: "bench"})
		}},
		{"file", func(c *reqstate.AESGCM) mrtr.Auditor {
			w, err := audit.OpenFile(filepath.Join(b.TempDir(), "audit.jsonl"), &audit.Options{Keys: c.KeyRing, Node: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { w.Close() })
			return w
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			codec := reqstate.New(ring, nil)
			opts := &mrtr.Options{Store: replay.NewMemory(nil)}
			if a := bc.w(codec); a != nil {
				opts.Auditor = a
			}
			g := mrtr.New(codec, opts)
			r := &mrtr.Request{Method: "tools/call", ProtocolVersion: "2026-07-28", Target: "deploy",
				Principal: reqstate.Principal{Issuer: "https://id.example", Subject: "alice"},
				Arguments: []byte(`{"service":"api","env":"production"}`),
				Meta:      map[string]any{"io.modelcontextprotocol/clientInfo": map[string]any{"name": "cli", "version": "1"}}}
			answers := map[string]any{"confirm": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				f, _ := g.Begin(ctx, r)
				tok, err := f.PauseInputs(nil, mrtr.Input{Key: "confirm", Method: "elicitation/create"})
				if err != nil {
					b.Fatal(err)
				}
				f.End(ctx, nil)
				res := *r
				res.RequestState, res.InputResponses = tok, answers
				if f, err = g.Begin(ctx, &res); err != nil {
					b.Fatal(err)
				}
				f.Finish(ctx, mrtr.OutcomeComplete, 0)
				f.End(ctx, nil)
			}
		})
	}
}
