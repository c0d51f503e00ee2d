package task_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/testing/adaptertest"
	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
)

// TestObserverEvents pins what a Manager reports: every event of a task
// with one input round, a cross-caller refusal, a gate refusal, ignored
// answers and a cancellation, in order, each naming the request it
// belongs to and the task.
func TestObserverEvents(t *testing.T) {
	rec := &adaptertest.TaskRecorder{}
	s := adaptertest.RunTaskScenario(t, rec)
	kinds, events := rec.Snapshot()
	want := []string{"created", "input", "rejected:unknown_task", "rejected:missing_extension", "updated",
		"rejected:answers_ignored", "ended", "created", "cancelled"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
	created := events[0].(task.Event)
	if created.Method != "tools/call" || created.Target != "deploy" || created.Principal != s.Alice || created.TaskID != s.Asked ||
		created.RequestID != "7" || created.Start.IsZero() {
		t.Errorf("created: %+v", created)
	}
	if h, err := created.ArgsHash(); err != nil || h == ([32]byte{}) {
		t.Errorf("created: ArgsHash %x, %v", h, err)
	}
	in := events[1].(task.InputEvent)
	if in.Round != 1 || !slices.Equal(in.Inputs, []mrtr.Input{{Key: "confirm", Method: "elicitation/create"}}) ||
		in.Target != "deploy" || in.TaskID != s.Asked {
		t.Errorf("input: %+v", in)
	}
	if r := events[2].(task.RejectEvent); r.Method != task.MethodGet || r.Principal != s.Bob || r.TaskID != s.Asked {
		t.Errorf("unknown_task: %+v", r)
	}
	if r := events[3].(task.RejectEvent); r.Method != task.MethodGet || r.Principal != s.Alice || r.TaskID != "" {
		t.Errorf("missing_extension: %+v", r)
	}
	up := events[4].(task.UpdateEvent)
	if up.Method != task.MethodUpdate || up.Target != "" || up.Principal != s.Alice || up.TaskID != s.Asked ||
		!slices.Equal(up.Answers, []mrtr.Answer{{Key: "confirm", Action: mrtr.ActionAccept}}) {
		t.Errorf("updated: %+v", up)
	}
	if r := events[5].(task.RejectEvent); !slices.Equal(r.Answers, []mrtr.Answer{{Key: "never", Action: mrtr.ActionDecline}}) {
		t.Errorf("answers_ignored: %+v", r)
	}
	end := events[6].(task.EndEvent)
	if end.Outcome != mrtr.OutcomeComplete || end.Rounds != 1 || end.Target != "deploy" || end.TaskID != s.Asked || end.Duration <= 0 {
		t.Errorf("ended: %+v", end)
	}
	if c := events[8].(task.Event); c.Method != task.MethodCancel || c.TaskID != s.Cancelled || c.Principal != s.Alice {
		t.Errorf("cancelled: %+v", c)
	}
}

// TestObserverOutcomes pins TaskEnded's outcome: a result with isError is
// a tool error, an RPCError an error with its code, any other error or a
// panic -32603.
func TestObserverOutcomes(t *testing.T) {
	for _, c := range []struct {
		name string
		res  string
		err  error
		want mrtr.CallOutcome
		code int64
	}{
		{"complete", `{"content":[]}`, nil, mrtr.OutcomeComplete, 0},
		{"tool_error", `{"content":[],"isError":true}`, nil, mrtr.OutcomeToolError, 0},
		{"rpc", "", &task.RPCError{Code: -32042, Message: "no"}, mrtr.OutcomeError, -32042},
		{"internal", "", errors.New("boom"), mrtr.OutcomeError, -32603},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &adaptertest.TaskRecorder{}
			ended := make(chan task.EndEvent, 1)
			m := task.NewManager(task.NewMemory(nil), &task.Options{Observer: endHook{rec, ended}})
			_, err := m.Start(t.Context(), reqstate.Principal{}, task.Spec{}, func(context.Context, *task.Run) (json.RawMessage, error) {
				if c.err != nil {
					return nil, c.err
				}
				return json.RawMessage(c.res), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			e := <-ended
			if e.Outcome != c.want || e.ErrorCode != c.code || e.Method != "tools/call" {
				t.Errorf("ended %+v, want %s %d", e, c.want, c.code)
			}
		})
	}
}

type endHook struct {
	*adaptertest.TaskRecorder
	ended chan task.EndEvent
}

func (h endHook) TaskEnded(_ context.Context, e task.EndEvent) { h.ended <- e }
