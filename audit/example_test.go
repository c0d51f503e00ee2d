package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/audit"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// A Writer set as the guard's Auditor records a paused call and its
// resume; Verify checks the trail with the same ring.
func Example() {
	ring, _ := reqstate.GenerateKeyRing("k1", nil)
	codec := reqstate.New(ring, nil)
	var trail bytes.Buffer
	w := audit.NewWriter(&trail, "", &audit.Options{Keys: codec.KeyRing, Node: "node-1"})
	g := mrtr.New(codec, &mrtr.Options{Store: replay.NewMemory(nil), Auditor: w})
	ctx := context.Background()
	r := &mrtr.Request{Method: "tools/call", ProtocolVersion: "2026-07-28", Target: "deploy",
		Principal: reqstate.Principal{Issuer: "https://id.example", Subject: "alice"},
		Arguments: []byte(`{"env":"production"}`)}

	f, _ := g.Begin(ctx, r) // round 1: the handler asks
	tok, _ := f.PauseInputs(nil, mrtr.Input{Key: "confirm", Method: "elicitation/create"})
	f.End(ctx, nil)

	r.RequestState = tok // round 2: the client answers
	r.InputResponses = map[string]any{"confirm": json.RawMessage(`{"action":"accept","content":{"ok":true}}`)}
	f, _ = g.Begin(ctx, r)
	f.Finish(ctx, mrtr.OutcomeComplete, 0)
	f.End(ctx, nil)

	for _, b := range bytes.Split(bytes.TrimSpace(trail.Bytes()), []byte("\n")) {
		l, _ := audit.ParseLine(b)
		fmt.Printf("%s round %d by %s: inputs %v answers %v outcome %q\n", l.Event, l.Round, l.Principal.Subject, l.Inputs, l.Answers, l.Outcome)
	}
	res, err := audit.Verify(&trail, ring, nil)
	fmt.Println("lines:", res.Lines, "error:", err)
	// Output:
	// paused round 1 by alice: inputs [{confirm elicitation/create}] answers [] outcome ""
	// resumed round 1 by alice: inputs [] answers [{confirm accept}] outcome ""
	// completed round 1 by alice: inputs [] answers [] outcome "complete"
	// lines: 3 error: <nil>
}
