package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

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

// A node key (mrtr audit keygen) signs the trail's checkpoints, the
// Writer hands each to the log, and an auditor checks the trail with
// FILE.pub and the log's copy of the checkpoints, holding no secret.
func Example_sealed() {
	dir, _ := os.MkdirTemp("", "audit-example")
	defer os.RemoveAll(dir)

	// The node: a key file (0600) and FILE.pub, once.
	key := filepath.Join(dir, "audit.key")
	if _, err := audit.GenerateKeyFile(key, nil); err != nil {
		panic(err)
	}
	signer, err := audit.LoadSigner(key)
	if err != nil {
		panic(err)
	}
	fmt.Printf("key mode: %s\n", signer.Mode()) // and signer.Mode().GivesUp() in the start log

	ring, _ := reqstate.GenerateKeyRing("k1", nil)
	var logs bytes.Buffer // what the log pipeline carries off the host
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	path := filepath.Join(dir, "audit.jsonl")
	w, err := audit.OpenFile(path, &audit.Options{
		Keys: func() *reqstate.KeyRing { return ring }, Node: "node-1", Signer: signer,
		OnCheckpoint: func(cp audit.Checkpoint) { log.Info("mrtr audit checkpoint", audit.CheckpointLogKey, cp) },
	})
	if err != nil {
		panic(err)
	}
	w.Write(&audit.Line{Event: audit.EventCompleted, Method: "tools/call", Target: "deploy", Outcome: "complete"})
	w.Close() // the final checkpoint

	// The auditor: FILE.pub, the log, the trail.
	pub, _ := audit.ReadPublicKey(key + ".pub")
	cps, _ := audit.ReadCheckpoints(&logs)
	trail, _ := os.Open(path)
	defer trail.Close()
	res, _ := audit.VerifySealed(pub, []io.Reader{trail}, &audit.SealOptions{Node: "node-1", Checkpoints: cps})
	fmt.Printf("%s (exit %d): %d lines, final checkpoint %d, %d log checkpoints match\n",
		res.Verdict, res.Verdict.ExitCode(), res.Lines, res.Last.Seq, res.LogMatched)
	// Output:
	// key mode: evolving
	// sealed (exit 0): 3 lines, final checkpoint 2, 2 log checkpoints match
}
