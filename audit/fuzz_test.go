package audit_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/audit"
	"github.com/mrtr-go/mrtr/reqstate"
)

// FuzzVerify feeds Verify and ParseLine, the decoders of a trail read
// from disk, arbitrary bytes: neither panics, and a trail that verifies
// under the fuzz ring is byte-identical to the one written under it (a
// line cannot be changed and still verify).
func FuzzVerify(f *testing.F) {
	var key reqstate.Key
	key.ID = "k1"
	copy(key.Secret[:], "fuzz-fuzz-fuzz-fuzz-fuzz-fuzz-fu")
	ring, err := reqstate.NewKeyRing(key)
	if err != nil {
		f.Fatal(err)
	}
	// A trail written the same way by every fuzz worker: fixed time.
	var buf bytes.Buffer
	w := audit.NewWriter(&buf, "", &audit.Options{Keys: func() *reqstate.KeyRing { return ring }, Node: "n1"})
	at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	for _, l := range []audit.Line{
		{Time: at, Event: audit.EventPaused, Flow: "f1", Round: 1, Method: "tools/call", Target: "deploy \"x\"\u2028",
			Principal: audit.Principal{Issuer: "i", Subject: "s"}, Inputs: []audit.Input{{Key: "a", Method: "elicitation/create"}}},
		{Time: at, Event: audit.EventResumed, Flow: "f1", Round: 1, Principal: audit.Principal{Anonymous: true},
			Answers: []audit.Answer{{Key: "a", Action: "decline"}}, Client: &audit.Client{Name: "c", Version: "1"}},
		{Time: at, Event: audit.EventCompleted, Outcome: "error", ErrorCode: -32603, RequestID: "1"},
	} {
		if err := w.Write(&l); err != nil {
			f.Fatal(err)
		}
	}
	trail := buf.Bytes()
	f.Add(trail)
	for _, l := range lines(trail) {
		f.Add(l)
	}
	f.Add([]byte(`{"schema":"mrtr.audit/v1","event":"x","kid":"k1","mac":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := audit.ParseLine(bytes.TrimSuffix(data, []byte("\n")))
		if err == nil && (l.Schema != audit.Schema || l.KeyID == "") {
			t.Fatalf("ParseLine accepted %q", data)
		}
		res, err := audit.Verify(bytes.NewReader(data), ring, nil)
		if err != nil || res.Lines == 0 {
			return
		}
		// Every line verified: the data must be a prefix of whole lines
		// of the trail written.
		if !bytes.HasPrefix(trail, data) || data[len(data)-1] != '\n' {
			t.Fatalf("a trail that was not written verifies: %q", data)
		}
	})
}
