package audit_test

import (
	"bytes"
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr/audit"
	"github.com/mrtr-go/mrtr/internal/testing/adaptertest"
	"github.com/mrtr-go/mrtr/reqstate"
)

// TestTaskLines pins the trail of a task with one input round, a
// cross-caller refusal, a gate refusal, ignored answers and a
// cancellation: the events in order with a paused call's fields, a trail
// that verifies, and no secret: no task id (in clear or in base64), no
// argument value, answer content, result or status message.
func TestTaskLines(t *testing.T) {
	ring := testRing(t)
	var buf bytes.Buffer
	w := audit.NewWriter(&buf, "", &audit.Options{Keys: func() *reqstate.KeyRing { return ring }, Node: "n1", Upstream: "https://up.example/mcp"})
	s := adaptertest.RunTaskScenario(t, w)

	res, err := audit.Verify(bytes.NewReader(buf.Bytes()), ring, nil)
	if err != nil || res.Lines != 9 {
		t.Fatalf("Verify: %+v, %v\n%s", res, err, buf.Bytes())
	}
	for _, secret := range s.Secrets {
		for _, form := range []string{secret, base64.RawURLEncoding.EncodeToString([]byte(secret)), base64.StdEncoding.EncodeToString([]byte(secret))} {
			if bytes.Contains(buf.Bytes(), []byte(form)) {
				t.Fatalf("the trail holds %q:\n%s", form, buf.Bytes())
			}
		}
	}
	var ls []*audit.Line
	for _, b := range lines(buf.Bytes()) {
		if len(b) == 0 {
			continue
		}
		l, err := audit.ParseLine(bytes.TrimSuffix(b, []byte("\n")))
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	var events []string
	for _, l := range ls {
		e := l.Event
		if l.Reason != "" {
			e += ":" + l.Reason
		}
		events = append(events, e)
	}
	want := []string{"task_created", "task_input", "rejected:unknown_task", "rejected:missing_extension", "task_updated",
		"rejected:answers_ignored", "task_completed", "task_created", "task_cancelled"}
	if !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v", events, want)
	}
	asked := ls[0].Task
	if !strings.HasPrefix(asked, "hmac-sha256:") || len(asked) != len("hmac-sha256:")+43 {
		t.Fatalf("task digest %q", asked)
	}
	for i, l := range ls {
		wantTask := asked
		switch i {
		case 3:
			wantTask = "" // the gate refuses before the task is named
		case 7, 8:
			wantTask = ls[7].Task
		}
		if l.Task != wantTask || l.Node != "n1" || l.Upstream != "https://up.example/mcp" || l.Client == nil || l.Client.Name != "c" || l.RequestID != "7" {
			t.Errorf("line %d: task %q node %q upstream %q client %+v request %q", i+1, l.Task, l.Node, l.Upstream, l.Client, l.RequestID)
		}
		p := audit.Principal{Issuer: "https://idp.example", Subject: "alice"}
		if i == 2 {
			p.Subject = "bob"
		}
		if l.Principal != p {
			t.Errorf("line %d: principal %+v, want %+v", i+1, l.Principal, p)
		}
		call := l.Event == "task_created" || l.Event == "task_input" || l.Event == "task_completed"
		if call != (l.Method == "tools/call" && l.Target == "deploy" && l.ArgsDigest != "") {
			t.Errorf("line %d (%s): method %q target %q args_digest %q", i+1, l.Event, l.Method, l.Target, l.ArgsDigest)
		}
		if !call && (l.Target != "" || l.ArgsDigest != "" || !strings.HasPrefix(l.Method, "tasks/")) {
			t.Errorf("line %d (%s): method %q target %q args_digest %q", i+1, l.Event, l.Method, l.Target, l.ArgsDigest)
		}
	}
	if ls[7].Task == asked || ls[7].Task == "" {
		t.Errorf("two tasks share the digest %q", asked)
	}
	if ls[0].ArgsDigest != ls[6].ArgsDigest {
		t.Errorf("a task's lines carry different args digests")
	}
	if !slices.Equal(ls[1].Inputs, []audit.Input{{Key: "confirm", Method: "elicitation/create"}}) || ls[1].Round != 1 {
		t.Errorf("task_input: %+v round %d", ls[1].Inputs, ls[1].Round)
	}
	if !slices.Equal(ls[4].Answers, []audit.Answer{{Key: "confirm", Action: "accept"}}) {
		t.Errorf("task_updated: %+v", ls[4].Answers)
	}
	if !slices.Equal(ls[5].Answers, []audit.Answer{{Key: "never", Action: "decline"}}) {
		t.Errorf("answers_ignored: %+v", ls[5].Answers)
	}
	if ls[6].Outcome != "complete" || ls[6].ErrorCode != 0 || ls[6].Round != 1 {
		t.Errorf("task_completed: outcome %q code %d round %d", ls[6].Outcome, ls[6].ErrorCode, ls[6].Round)
	}
}
