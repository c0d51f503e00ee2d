package audit_test

import (
	"bytes"
	"io"
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
	ring := fuzzRing(f)
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
		// A task's lines (tasks.go).
		{Time: at, Event: audit.EventTaskCreated, Task: taskDigest, Method: "tools/call", Target: "deploy",
			Principal: audit.Principal{Anonymous: true}, ArgsDigest: "hmac-sha256:" + taskDigest[12:], RequestID: "2"},
		{Time: at, Event: audit.EventTaskInput, Task: taskDigest, Round: 1, Method: "tools/call", Target: "deploy",
			Inputs: []audit.Input{{Key: "a", Method: "elicitation/create"}, {Key: "b", Method: "sampling/createMessage"}}},
		{Time: at, Event: audit.EventRejected, Task: taskDigest, Method: "tasks/get", Reason: "unknown_task",
			Principal: audit.Principal{Issuer: "i", Subject: "other"}},
		{Time: at, Event: audit.EventRejected, Method: "tasks/update", Reason: "missing_extension"},
		{Time: at, Event: audit.EventTaskUpdated, Task: taskDigest, Method: "tasks/update", Answers: []audit.Answer{{Key: "a", Action: "accept"}}},
		{Time: at, Event: audit.EventRejected, Task: taskDigest, Method: "tasks/update", Reason: "answers_ignored",
			Answers: []audit.Answer{{Key: "zz", Action: "other"}}},
		{Time: at, Event: audit.EventTaskCompleted, Task: taskDigest, Round: 1, Method: "tools/call", Target: "deploy", Outcome: "error", ErrorCode: -32042},
		{Time: at, Event: audit.EventTaskCancelled, Task: taskDigest, Method: "tasks/cancel", Node: "n1"},
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

// taskDigest stands for a task id's digest in the fuzz seeds.
const taskDigest = "hmac-sha256:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"

// fuzzRing is the fixed ring of the fuzz targets: every worker writes
// the same trail.
func fuzzRing(f *testing.F) *reqstate.KeyRing {
	var key reqstate.Key
	key.ID = "k1"
	copy(key.Secret[:], "fuzz-fuzz-fuzz-fuzz-fuzz-fuzz-fu")
	ring, err := reqstate.NewKeyRing(key)
	if err != nil {
		f.Fatal(err)
	}
	return ring
}

// FuzzVerifySealed feeds VerifySealed (and ReadCheckpoints, which reads
// the same lines as a log) arbitrary trails: neither panics, and a
// trail that verifies sealed (VerdictOK) is byte-identical to the one
// written: no line, checkpoint or restart record can be changed, and no
// abandoned or torn line hidden, and still seal.
func FuzzVerifySealed(f *testing.F) {
	trails, pub := sealedFuzzTrail(f)
	if res, _ := audit.VerifySealed(pub, []io.Reader{bytes.NewReader(trails[0])}, nil); res.Verdict != audit.VerdictUnsealed ||
		res.Abandoned != 1 || len(res.Torn) != 1 || res.Last == nil || !res.Last.Final || res.Last.Epoch != 2 {
		f.Fatalf("the seed trail: %+v (%v)", res, res.Err)
	}
	if res, _ := audit.VerifySealed(pub, []io.Reader{bytes.NewReader(trails[1])}, nil); res.Verdict != audit.VerdictOK || res.FirstEpoch != 2 ||
		!bytes.Contains(trails[1], []byte(`"event":"certs"`)) {
		f.Fatalf("the trail begun in epoch 2: %+v (%v)", res, res.Err)
	}
	for _, trail := range trails {
		f.Add(trail)
		ls := lines(trail)
		for i := range ls {
			f.Add(ls[i])
			f.Add(join(append(append([][]byte(nil), ls[:i]...), ls[i+1:]...))) // one line deleted
		}
	}
	written := func(data []byte) bool {
		for _, trail := range trails {
			if bytes.HasPrefix(trail, data) {
				return true
			}
		}
		return false
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cps, _ := audit.ReadCheckpoints(bytes.NewReader(data))
		res, err := audit.VerifySealed(pub, []io.Reader{bytes.NewReader(data)}, &audit.SealOptions{Checkpoints: cps})
		if err != nil {
			t.Fatal(err)
		}
		if (res.Verdict == audit.VerdictBroken) != (res.Err != nil) {
			t.Fatalf("verdict %v with error %v", res.Verdict, res.Err)
		}
		// Mid-chain, anchored by the log's checkpoints (the data's own).
		if cont, err := audit.VerifySealed(pub, []io.Reader{bytes.NewReader(data)}, &audit.SealOptions{Continued: true, Checkpoints: cps}); err != nil ||
			(cont.Verdict == audit.VerdictBroken) != (cont.Err != nil) {
			t.Fatalf("Continued: verdict %v with error %v, %v", cont.Verdict, cont.Err, err)
		}
		if res.Verdict == audit.VerdictOK && !isWhole(trails, data) {
			t.Fatalf("a trail that was not written seals: %q", data)
		}
		// What the newest checkpoint seals, its own line included, is
		// byte for byte what was written.
		if res.Verdict != audit.VerdictBroken && res.Last != nil {
			n := res.Last.Count + 1
			end := 0
			for range n {
				i := bytes.IndexByte(data[end:], '\n')
				if i < 0 {
					t.Fatalf("%d lines sealed, fewer in the data", n)
				}
				end += i + 1
			}
			if !written(data[:end]) {
				t.Fatalf("sealed lines that were not written: %q", data[:end])
			}
		}
	})
}

// isWhole reports whether data is one of trails.
func isWhole(trails [][]byte, data []byte) bool {
	for _, t := range trails {
		if bytes.Equal(t, data) {
			return true
		}
	}
	return false
}
