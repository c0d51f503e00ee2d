package audit_test

import (
	"context"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
		{"sealed-file", func(c *reqstate.AESGCM) mrtr.Auditor {
			// A node key, checkpoints every 10 s and an epoch of 15 min,
			// the defaults: per flow, the sealing bookkeeping.
			return sealedWriter(b, audit.Options{Keys: c.KeyRing})
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

// BenchmarkSeal is what checkpoints cost, on a file in b.TempDir():
//   - write: one Write with a Signer and no checkpoint due (the
//     sealing bookkeeping on the line's path);
//   - checkpoint: one checkpoint (sign, write, fsync, hand to the hook);
//   - evolve: one checkpoint that also evolves the key (the key file
//     replaced: write, two fsyncs, a rename);
//   - write-parallel and write-parallel-while-evolving: Writes from
//     GOMAXPROCS goroutines, alone and while another goroutine
//     checkpoints and evolves the key back to back: what a call waits
//     for does not include the fsyncs of a checkpoint or an epoch.
func BenchmarkSeal(b *testing.B) {
	ring := testRing(b)
	open := func(b *testing.B, epoch time.Duration) *audit.Writer {
		return sealedWriter(b, audit.Options{Keys: func() *reqstate.KeyRing { return ring }, CheckpointInterval: -1, Epoch: epoch})
	}
	line := func() *audit.Line {
		return &audit.Line{Event: audit.EventCompleted, Method: "tools/call", Target: "deploy", RequestID: "7", Outcome: "complete",
			Principal: audit.Principal{Issuer: "https://id.example", Subject: "alice"}}
	}
	b.Run("write", func(b *testing.B) {
		w := open(b, -1)
		b.ReportAllocs()
		for b.Loop() {
			w.Write(line())
		}
	})
	b.Run("checkpoint", func(b *testing.B) {
		w := open(b, -1)
		b.ReportAllocs()
		for b.Loop() {
			w.Write(line())
			if err := w.Checkpoint(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("evolve", func(b *testing.B) {
		w := open(b, time.Nanosecond) // every checkpoint ends an epoch
		b.ReportAllocs()
		for b.Loop() {
			w.Write(line())
			if err := w.Checkpoint(); err != nil {
				b.Fatal(err)
			}
		}
	})
	parallel := func(b *testing.B, evolving bool) {
		w := open(b, time.Nanosecond)
		var stopped atomic.Bool
		var wg sync.WaitGroup
		if evolving {
			wg.Go(func() {
				for !stopped.Load() {
					w.Checkpoint()
				}
			})
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				w.Write(line())
			}
		})
		stopped.Store(true)
		wg.Wait()
	}
	b.Run("write-parallel", func(b *testing.B) { parallel(b, false) })
	b.Run("write-parallel-while-evolving", func(b *testing.B) { parallel(b, true) })
}

// sealedWriter opens a trail in b.TempDir() with a new node key and o.
func sealedWriter(b *testing.B, o audit.Options) *audit.Writer {
	dir := b.TempDir()
	key := filepath.Join(dir, "audit.key")
	if _, err := audit.GenerateKeyFile(key, nil); err != nil {
		b.Fatal(err)
	}
	s, err := audit.LoadSigner(key)
	if err != nil {
		b.Fatal(err)
	}
	o.Node, o.Signer, o.OnCheckpoint = "bench", s, func(audit.Checkpoint) {}
	w, err := audit.OpenFile(filepath.Join(dir, "audit.jsonl"), &o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { w.Close() })
	return w
}
