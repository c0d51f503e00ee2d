package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/audit"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// TestForwardedBy (issue 39, item 4): the lines of a call whose context
// says another replica forwarded it carry that replica as forwarded_by,
// and verify; the others carry none.
func TestForwardedBy(t *testing.T) {
	ring, _ := reqstate.GenerateKeyRing("k1", nil)
	codec := reqstate.New(ring, nil)
	var trail bytes.Buffer
	w := audit.NewWriter(&trail, "", &audit.Options{Keys: codec.KeyRing, Node: "holder"})
	g := mrtr.New(codec, &mrtr.Options{Store: replay.NewMemory(nil), Auditor: w})
	r := &mrtr.Request{Method: "tools/call", ProtocolVersion: "2026-07-28", Target: "deploy", Arguments: []byte(`{}`)}
	f, _ := g.Begin(context.Background(), r)
	tok, _ := f.Pause(nil, "confirm")
	f.End(context.Background(), nil)

	ctx := audit.WithForwardedBy(context.Background(), "REPLICA7")
	r.RequestState = tok
	r.InputResponses = map[string]any{"confirm": json.RawMessage(`{"action":"accept"}`)}
	f, err := g.Begin(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	f.End(ctx, nil)

	want := []string{"", "REPLICA7", "REPLICA7"} // paused here; resumed and completed after forwarding
	lines := bytes.Split(bytes.TrimSpace(trail.Bytes()), []byte("\n"))
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), trail.Bytes())
	}
	for i, b := range lines {
		l, err := audit.ParseLine(b)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if l.Forwarder != want[i] {
			t.Errorf("line %d: forwarded_by %q, want %q: %s", i+1, l.Forwarder, want[i], b)
		}
	}
	if _, err := audit.Verify(bytes.NewReader(trail.Bytes()), ring, nil); err != nil {
		t.Fatalf("verify: %v", err)
	}
}
