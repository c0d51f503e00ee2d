package task_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
)

// A task that asks one question, driven through the Manager as an adapter
// drives it from tasks/get and tasks/update.
func Example() {
	m := task.NewManager(task.NewMemory(nil), &task.Options{AnswerPoll: 5 * time.Millisecond})
	ctx := context.Background()
	bob := reqstate.Principal{Issuer: "https://id.example", Subject: "bob"}

	raw, _ := m.Start(ctx, bob, task.Spec{TTL: time.Minute}, func(ctx context.Context, r *task.Run) (json.RawMessage, error) {
		ans, err := r.Ask(ctx, map[string]json.RawMessage{
			"color": json.RawMessage(`{"method":"elicitation/create","params":{"mode":"form","message":"Color?","requestedSchema":{"type":"object"}}}`),
		})
		if err != nil {
			return nil, err
		}
		var a struct{ Content struct{ Color string } }
		_ = json.Unmarshal(ans["color"], &a)
		return json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": "painted " + a.Content.Color}}})
	})
	var created struct{ TaskID, Status string }
	_ = json.Unmarshal(raw, &created)
	fmt.Println("created:", created.Status)

	var t struct {
		Status string
		Result struct{ Content []struct{ Text string } }
	}
	poll := func() {
		raw, _ := m.Get(ctx, bob, created.TaskID)
		_ = json.Unmarshal(raw, &t)
	}
	for poll(); t.Status != "input_required"; poll() {
		time.Sleep(time.Millisecond)
	}
	fmt.Println("then:", t.Status)

	// Another caller's request finds nothing.
	_, err := m.Get(ctx, reqstate.Principal{Subject: "eve"}, created.TaskID)
	fmt.Println("eve:", err)

	_ = m.Update(ctx, bob, created.TaskID, map[string]json.RawMessage{"color": json.RawMessage(`{"action":"accept","content":{"color":"blue"}}`)})
	for poll(); t.Status != "completed"; poll() {
		time.Sleep(time.Millisecond)
	}
	fmt.Println("finally:", t.Status, t.Result.Content[0].Text)
	// Output:
	// created: working
	// then: input_required
	// eve: task: unknown task
	// finally: completed painted blue
}
