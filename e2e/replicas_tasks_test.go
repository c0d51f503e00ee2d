package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/testing/testredis"
)

// taskRPC sends one 2026-07-28 request declaring elicitation and the tasks
// extension to url as bearer, with the Mcp-Method and Mcp-Name headers,
// and returns its result or its error (from JSON or an event stream).
func taskRPC(t testing.TB, ctx context.Context, url, bearer, method, name string, params map[string]any) (map[string]json.RawMessage, *rpcError) {
	t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientInfo":      map[string]any{"name": "e2e", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{},
			"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s on %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return rpcResponse(t, method+" on "+url, raw)
}

// taskState is what tasks/get tells of a task.
type taskState struct {
	Status        string                     `json:"status"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	Result        struct {
		Content []struct{ Text string } `json:"content"`
	} `json:"result"`
}

// getTask polls tasks/get on url until the task's status is want.
func getTask(t *testing.T, ctx context.Context, url, bearer, id, want string) taskState {
	t.Helper()
	var st taskState
	for {
		res, e := taskRPC(t, ctx, url, bearer, "tasks/get", id, map[string]any{"taskId": id})
		if e != nil {
			t.Fatalf("tasks/get %s: %d %s", url, e.Code, e.Message)
		}
		b, _ := json.Marshal(res)
		st = taskState{}
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		if st.Status == want {
			return st
		}
		if ctx.Err() != nil {
			t.Fatalf("task on %s: status %q, want %q: %s", url, st.Status, want, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReplicaTasks: two `mrtr serve` replicas on one Redis (the same
// --keys, --server-id and --replay: one redis-server; Sentinel with one
// replica and --replay-replicas 1, so creation and answers wait for its
// acknowledgement; a three-primary Cluster) keep their tasks there. A task
// alice creates on A is read on B, answered on B (tasks/update) and its
// work on A picks the answer up and completes; bob's tasks/get,
// tasks/update and tasks/cancel of it on B get exactly what an unknown id
// gets; a second task alice creates on A is cancelled through B.
func TestReplicaTasks(t *testing.T) {
	t.Run("Redis", func(t *testing.T) { replicaTasks(t, testredis.Start(t)) })
	t.Run("Sentinel", func(t *testing.T) {
		// A loaded machine can take longer than the default 500 ms to
		// see the replica's acknowledgement; the test is not about that.
		replicaTasks(t, testredis.StartSentinel(t, 1, 1).URL(), "--replay-replicas", "1", "--replay-timeout", "10s")
	})
	t.Run("Cluster", func(t *testing.T) { replicaTasks(t, testredis.StartCluster(t, 3, 0).URL()) })
}

func replicaTasks(t *testing.T, rurl string, extra ...string) {
	args := append([]string{"--keys", mnKeyRing(t, "k1"), "--server-id", mnServerID, "--replay", rurl, "--auth-hs256-secret", bridgeSecret}, extra...)
	a := mnStart(t, "127.0.0.1:0", nil, args...)
	b := mnStart(t, "127.0.0.1:0", nil, args...)
	alice, bob := mint(t, bridgeSecret, "alice"), mint(t, bridgeSecret, "bob")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	create := func(tool string, args map[string]any) string {
		t.Helper()
		res, e := taskRPC(t, ctx, a.url, alice, "tools/call", tool, map[string]any{"name": tool, "arguments": args})
		var rt, id string
		json.Unmarshal(res["resultType"], &rt)
		json.Unmarshal(res["taskId"], &id)
		if e != nil || rt != "task" || id == "" {
			t.Fatalf("%s on A: want a task, got %v %+v. A's log:\n%s", tool, res, e, tail(a.logs.String(), 20))
		}
		return id
	}
	id := create("confirm_delete", map[string]any{"filename": "notes.txt"})
	st := getTask(t, ctx, b.url, alice, id, "input_required")
	if _, ok := st.InputRequests["confirm"]; !ok || len(st.InputRequests) != 1 {
		t.Fatalf("the task read on B asks %v, want confirm", st.InputRequests)
	}

	// Another caller, and an id nobody made: the same answer, on every path.
	_, unknown := taskRPC(t, ctx, b.url, alice, "tasks/get", "no-such-task", map[string]any{"taskId": "no-such-task"})
	if unknown == nil || unknown.Code != -32602 {
		t.Fatalf("an unknown id on B: want -32602, got %+v", unknown)
	}
	answer := map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}
	for method, params := range map[string]map[string]any{
		"tasks/get":    {"taskId": id},
		"tasks/update": {"taskId": id, "inputResponses": answer},
		"tasks/cancel": {"taskId": id},
	} {
		res, e := taskRPC(t, ctx, b.url, bob, method, id, params)
		if e == nil || e.Code != unknown.Code || e.Message != unknown.Message || string(e.Data) != string(unknown.Data) {
			t.Errorf("bob's %s of alice's task on B: %v %+v, want the unknown-id answer %+v", method, res, e, unknown)
		}
	}

	if _, e := taskRPC(t, ctx, b.url, alice, "tasks/update", id, map[string]any{"taskId": id, "inputResponses": answer}); e != nil {
		t.Fatalf("alice's tasks/update on B: %d %s", e.Code, e.Message)
	}
	st = getTask(t, ctx, b.url, alice, id, "completed")
	if len(st.Result.Content) != 1 || st.Result.Content[0].Text != "deleted notes.txt" {
		t.Fatalf("the task run on A, answered on B, ended with %+v", st.Result)
	}
	if got := getTask(t, ctx, a.url, alice, id, "completed"); got.Result.Content[0].Text != "deleted notes.txt" {
		t.Fatalf("A reads %+v", got.Result)
	}

	id = create("slow_compute", map[string]any{"seconds": 300, "label": "long"})
	getTask(t, ctx, b.url, alice, id, "working")
	if _, e := taskRPC(t, ctx, b.url, alice, "tasks/cancel", id, map[string]any{"taskId": id}); e != nil {
		t.Fatalf("alice's tasks/cancel on B: %d %s", e.Code, e.Message)
	}
	getTask(t, ctx, a.url, alice, id, "cancelled")
	if strings.Contains(a.logs.String()+b.logs.String(), `"level":"ERROR"`) {
		t.Errorf("a replica logged an error:\n%s\n%s", tail(a.logs.String(), 20), tail(b.logs.String(), 20))
	}
}
