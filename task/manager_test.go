package task_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
)

var alice = reqstate.Principal{Issuer: "iss", Subject: "alice"}

type created struct {
	ResultType     string `json:"resultType"`
	TaskID         string `json:"taskId"`
	Status         string `json:"status"`
	TTLMs          int64  `json:"ttlMs"`
	PollIntervalMs int64  `json:"pollIntervalMs"`
}

func start(t *testing.T, m *task.Manager, spec task.Spec, w task.Work) created {
	t.Helper()
	raw, err := m.Start(context.Background(), alice, spec, w)
	if err != nil {
		t.Fatal(err)
	}
	var c created
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

type detailed struct {
	Status string          `json:"status"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func waitTerminal(t *testing.T, m *task.Manager, id string) detailed {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		raw, err := m.Get(context.Background(), alice, id)
		if err != nil {
			t.Fatal(err)
		}
		var d detailed
		_ = json.Unmarshal(raw, &d)
		if d.Status == "completed" || d.Status == "failed" || d.Status == "cancelled" {
			return d
		}
	}
	t.Fatalf("task %s did not end", id)
	return detailed{}
}

func TestManagerOutcomes(t *testing.T) {
	m := task.NewManager(task.NewMemory(nil), nil)
	c := start(t, m, task.Spec{TTL: 90 * time.Second, PollInterval: 250 * time.Millisecond}, func(context.Context, *task.Run) (json.RawMessage, error) {
		return json.RawMessage(`{"content":[]}`), nil
	})
	if c.ResultType != "task" || c.Status != "working" || c.TTLMs != 90000 || c.PollIntervalMs != 250 {
		t.Errorf("CreateTaskResult %+v", c)
	}
	if b, err := base64.RawURLEncoding.DecodeString(c.TaskID); err != nil || len(b) != task.IDBytes {
		t.Errorf("task id %q: %d bytes, %v", c.TaskID, len(b), err)
	}
	if d := waitTerminal(t, m, c.TaskID); d.Status != "completed" || string(d.Result) != `{"content":[]}` {
		t.Errorf("completed: %+v", d)
	}

	c = start(t, m, task.Spec{}, func(context.Context, *task.Run) (json.RawMessage, error) {
		return nil, &task.RPCError{Code: -32000, Message: "upstream down"}
	})
	if d := waitTerminal(t, m, c.TaskID); d.Status != "failed" || string(d.Error) != `{"code":-32000,"message":"upstream down"}` {
		t.Errorf("RPCError: %+v", d)
	}

	c = start(t, m, task.Spec{}, func(context.Context, *task.Run) (json.RawMessage, error) {
		panic("boom")
	})
	if d := waitTerminal(t, m, c.TaskID); d.Status != "failed" || strings.Contains(string(d.Error), "boom") || !strings.Contains(string(d.Error), "-32603") {
		t.Errorf("panic: %+v (the cause must not leak)", d)
	}
}

func TestManagerCancelEndsWork(t *testing.T) {
	m := task.NewManager(task.NewMemory(nil), nil)
	done := make(chan error, 1)
	c := start(t, m, task.Spec{}, func(ctx context.Context, r *task.Run) (json.RawMessage, error) {
		<-ctx.Done()
		done <- context.Cause(ctx)
		return json.RawMessage(`{"content":[]}`), nil // too late: cancelled stays
	})
	if err := m.Cancel(context.Background(), alice, c.TaskID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the work's context did not end")
	}
	if d := waitTerminal(t, m, c.TaskID); d.Status != "cancelled" {
		t.Errorf("status %s, want cancelled", d.Status)
	}
	// Cancelling a terminal task is acknowledged and changes nothing.
	if err := m.Cancel(context.Background(), alice, c.TaskID); err != nil {
		t.Errorf("second cancel: %v", err)
	}
	if err := m.Cancel(context.Background(), alice, "no-such-task"); !errors.Is(err, task.ErrUnknown) {
		t.Errorf("unknown: %v", err)
	}
	if _, err := m.Get(context.Background(), reqstate.Principal{}, c.TaskID); !errors.Is(err, task.ErrUnknown) {
		t.Errorf("anonymous Get of alice's task: %v, want ErrUnknown", err)
	}
}

func TestManagerBusy(t *testing.T) {
	m := task.NewManager(task.NewMemory(nil), &task.Options{MaxRunning: 1})
	release := make(chan struct{})
	c := start(t, m, task.Spec{}, func(context.Context, *task.Run) (json.RawMessage, error) {
		<-release
		return json.RawMessage(`{}`), nil
	})
	if _, err := m.Start(context.Background(), alice, task.Spec{}, nil); !errors.Is(err, task.ErrBusy) {
		t.Errorf("a second task: %v, want ErrBusy", err)
	}
	close(release)
	waitTerminal(t, m, c.TaskID)
}

func TestManagerAskKeysOnce(t *testing.T) {
	m := task.NewManager(task.NewMemory(nil), &task.Options{AnswerPoll: 5 * time.Millisecond})
	errs := make(chan error, 1)
	req := json.RawMessage(`{"method":"elicitation/create","params":{"message":"?"}}`)
	c := start(t, m, task.Spec{}, func(ctx context.Context, r *task.Run) (json.RawMessage, error) {
		got, err := r.Ask(ctx, map[string]json.RawMessage{"q": req})
		if err != nil {
			return nil, err
		}
		_, err = r.Ask(ctx, map[string]json.RawMessage{"q": req})
		errs <- err
		return got["q"], nil
	})
	for {
		raw, _ := m.Get(context.Background(), alice, c.TaskID)
		if strings.Contains(string(raw), `"input_required"`) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := m.Update(context.Background(), alice, c.TaskID, map[string]json.RawMessage{"q": json.RawMessage(`{"action":"decline"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; !errors.Is(err, task.ErrKeyReused) {
		t.Errorf("asking q twice: %v, want ErrKeyReused", err)
	}
	if d := waitTerminal(t, m, c.TaskID); string(d.Result) != `{"action":"decline"}` {
		t.Errorf("result %s", d.Result)
	}
}

func TestDeclared(t *testing.T) {
	for caps, want := range map[string]bool{
		`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`:                    true,
		`{"extensions":{"io.modelcontextprotocol/tasks":{"x":1}},"sampling":{}}`: true,
		`{"extensions":{"io.modelcontextprotocol/tasks":true}}`:                  false,
		`{"extensions":{"io.modelcontextprotocol/tasks":null}}`:                  false,
		`{"extensions":{}}`: false,
		`{"tasks":{}}`:      false,
		`[]`:                false,
	} {
		if got := task.Declared(json.RawMessage(caps)); got != want {
			t.Errorf("Declared(%s) = %v, want %v", caps, got, want)
		}
	}
}
