package gosdk_test

import (
	"context"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
)

// clients records the clientInfo in the _meta of each paused call the
// guard's Auditor hears of.
type clients struct {
	mu   sync.Mutex
	seen []any
}

func (c *clients) Resumed(context.Context, mrtr.ResumeEvent) error { return nil }
func (c *clients) Ended(context.Context, mrtr.EndEvent) error      { return nil }
func (c *clients) Paused(_ context.Context, e mrtr.PauseEvent) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = append(c.seen, e.Meta["io.modelcontextprotocol/clientInfo"])
	return nil
}

// TestAuditorSeesClientInfo: the Auditor learns who the client says it
// is from a 2026-07-28 request's _meta, and for a 2025-11-25 client,
// which sends it only at initialize, from its session.
func TestAuditorSeesClientInfo(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		rec := &clients{}
		e := startServer(t, serverOpts{guard: mrtr.Options{Auditor: rec}})
		cs := connect(t, e, clientOpts{legacy: legacy})
		if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{"service": "api", "env": "production"}}); err != nil {
			t.Fatal(err)
		}
		rec.mu.Lock()
		if len(rec.seen) == 0 {
			t.Fatalf("legacy %v: no pause heard", legacy)
		}
		ci, _ := rec.seen[0].(map[string]any)
		if ci["name"] != "test-client" || ci["version"] != "1" {
			t.Fatalf("legacy %v: clientInfo %#v", legacy, rec.seen[0])
		}
		rec.mu.Unlock()
	}
}
