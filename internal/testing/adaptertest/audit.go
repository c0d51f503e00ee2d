package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mrtr-go/mrtr"
)

// recorder is an mrtr.Auditor that writes each event as a short line,
// and fails the events named in fail.
type recorder struct {
	mu    sync.Mutex
	lines []string
	fail  string // "paused", "resumed" or "completed": refuse that event
}

var errTrailDown = errors.New("audit trail down")

func (r *recorder) record(event, line string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail == event {
		return errTrailDown
	}
	r.lines = append(r.lines, event+" "+line)
	return nil
}

func (r *recorder) Resumed(_ context.Context, e mrtr.ResumeEvent) error {
	if e.Outcome != mrtr.OutcomeOK {
		return r.record("rejected", string(e.Outcome))
	}
	return r.record("resumed", fmt.Sprint(e.Answers()))
}

func (r *recorder) Paused(_ context.Context, e mrtr.PauseEvent) error {
	return r.record("paused", fmt.Sprint(e.Inputs))
}

func (r *recorder) Ended(_ context.Context, e mrtr.EndEvent) error {
	if e.Paused {
		return nil
	}
	return r.record("completed", fmt.Sprint(e.Outcome, " ", e.ErrorCode))
}

func (r *recorder) take() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := strings.Join(r.lines, "; ")
	r.lines = nil
	return s
}

func (r *recorder) failOn(event string) {
	r.mu.Lock()
	r.fail = event
	r.mu.Unlock()
}

// auditTrail: the guard's Auditor hears of every pause with its input
// requests' methods, every resume with its answers' actions, and how
// every call that did not pause answered (complete, tool_error, error
// and its code), before the client is answered; an event it cannot
// record refuses the call with -32603: a pause is not sealed, a resume
// runs nothing, an answer is not sent.
func auditTrail(t *testing.T, run Start, fe Front) {
	rec := &recorder{}
	e := start(t, run, options{guard: mrtr.Options{Store: useMemory, Auditor: rec}})
	c := e.client("/mcp", "")
	tok := pauseDeploy(t, c, prodArgs)
	if r := c.Call(t, "tools/call", resume(tok, prodArgs, accept(map[string]any{"approve": true}))); r.Error != nil {
		t.Fatalf("resume: %v", r)
	}
	wantReject(t, "replay", c.Call(t, "tools/call", resume(tok, prodArgs, accept(map[string]any{"approve": true}))), mrtr.ReasonReplayed)
	if got, want := rec.take(), "paused [{confirm elicitation/create}]; resumed [{confirm accept}]; completed complete 0; rejected replayed"; got != want {
		t.Fatalf("trail:\n%s\nwant\n%s", got, want)
	}
	tok = pauseDeploy(t, c, prodArgs)
	declined := map[string]any{"confirm": map[string]any{"action": "decline"}}
	if r := c.Call(t, "tools/call", resume(tok, prodArgs, declined)); r.Error != nil || r.Result["isError"] != true {
		t.Fatalf("declined resume: %v", r)
	}
	if got, want := rec.take(), "paused [{confirm elicitation/create}]; resumed [{confirm decline}]; completed tool_error 0"; got != want {
		t.Fatalf("trail of a decline:\n%s\nwant\n%s", got, want)
	}

	internal := func(what string, r Response) {
		t.Helper()
		if r.Error == nil || r.Error.Code != mrtr.CodeInternalError {
			t.Fatalf("%s with the trail down: %v, want -32603", what, r)
		}
	}
	rec.failOn("paused")
	internal("a pause", c.Call(t, "tools/call", map[string]any{"name": "deploy", "arguments": prodArgs}))
	rec.failOn("")
	tok = pauseDeploy(t, c, prodArgs)
	rec.failOn("resumed")
	runs := e.probe.Runs.Load()
	internal("a resume", c.Call(t, "tools/call", resume(tok, prodArgs, accept(map[string]any{"approve": true}))))
	if e.probe.Runs.Load() != runs {
		t.Fatal("the handler ran on a resume the trail did not record")
	}
	rec.failOn("completed")
	// The refused resume released its token: the same one runs now, and
	// its answer is refused.
	internal("an answer", c.Call(t, "tools/call", resume(tok, prodArgs, accept(map[string]any{"approve": true}))))
	if e.probe.Runs.Load() != runs+1 {
		t.Fatal("the handler did not run on the released token")
	}
	// The handler ran: its token is spent, though its answer was refused.
	rec.failOn("")
	wantReject(t, "the token of a refused answer", c.Call(t, "tools/call", resume(tok, prodArgs, accept(map[string]any{"approve": true}))), mrtr.ReasonReplayed)
}
