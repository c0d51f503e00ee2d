package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// TestRequestAfterFinalResponseAnswered: a request the upstream sends
// right after its call's final response is answered (with an error: no
// call waits for it), never left queued where nobody reads it, whichever
// of the relay and the upstream's reader gets there first. Before, one sent
// between the relay's last look at the queue and the session's release
// stayed unanswered, and the upstream waited for it forever.
func TestRequestAfterFinalResponseAnswered(t *testing.T) {
	sc := &script{onCall: func(ch *scripted, id json.RawMessage) {
		ch.send(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": "done"}}}})
		ch.send(map[string]any{"jsonrpc": "2.0", "id": fmt.Sprint("late-", string(id)), "method": "elicitation/create", "params": map[string]any{"message": "?"}})
	}}
	b := New(Options{Dial: sc.dial})
	defer b.Close(context.Background())
	for i := range 200 {
		msg, _ := modernCall(t, b, "", nil)
		if msg["result"] == nil {
			t.Fatalf("call %d: %v", i, msg)
		}
		select {
		case a := <-sc.child(0).answers:
			if a.Error == nil {
				t.Fatalf("call %d: the late request was answered with a result: %s", i, a.Result)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("call %d: the request the upstream sent after its final response was never answered", i)
		}
	}
}
