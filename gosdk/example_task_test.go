package gosdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
)

// A tool that runs as a task (the io.modelcontextprotocol/tasks
// extension) and asks for confirmation inside it. The client polls
// tasks/get, answers the task's inputRequests with tasks/update, and reads
// the result from tasks/get. For many replicas, give task.NewManager a
// redistask store instead of the memory one.
func Example_task() {
	ring, _ := reqstate.GenerateKeyRing("2026-11", nil)
	server := mcp.NewServer(&mcp.Implementation{Name: "backups", Version: "1.0.0"}, nil)
	tasks := task.NewManager(task.NewMemory(nil), &task.Options{AnswerPoll: 10 * time.Millisecond})
	a := gosdk.Install(server, mrtr.New(reqstate.New(ring, nil), nil), &gosdk.Options{Tasks: tasks})

	type Backup struct {
		DB string `json:"db"`
	}
	gosdk.AddTool(a, &mcp.Tool{Name: "backup", Description: "back up a database"},
		func(ctx context.Context, req *mcp.CallToolRequest, args Backup, flow *gosdk.ToolFlow[struct{}]) (*mcp.CallToolResult, error) {
			return flow.RunTask(ctx, &gosdk.TaskOptions{TTL: time.Hour, PollInterval: time.Second},
				func(ctx context.Context, t *gosdk.Task) (*mcp.CallToolResult, error) {
					_ = t.SetStatus(ctx, "waiting for approval")
					ans, err := t.Ask(ctx, mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
						Message:         "Back up " + args.DB + " now?",
						RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}},
					}})
					if err != nil {
						return nil, err // cancelled, or the TTL passed
					}
					if r, ok := ans.Elicited("confirm"); !ok || r.Content["ok"] != true {
						return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "not approved"}}}, nil
					}
					_ = t.SetStatus(ctx, "copying")
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "backed up " + args.DB}}}, nil
				})
		})
	srv := httptest.NewServer(gosdk.NewHTTPHandler(server, &gosdk.HTTPOptions{JSONResponse: true}))
	defer srv.Close()

	// The client's side, as plain 2026-07-28 requests.
	var created struct{ ResultType, TaskID, Status string }
	call(srv.URL, "tools/call", "backup", map[string]any{"name": "backup", "arguments": map[string]any{"db": "orders"}}, &created)
	fmt.Println(created.ResultType, created.Status)

	var t struct {
		Status        string
		StatusMessage string
		InputRequests map[string]json.RawMessage
		Result        struct{ Content []struct{ Text string } }
	}
	for t.Status != "input_required" {
		time.Sleep(10 * time.Millisecond) // a real client waits pollIntervalMs
		call(srv.URL, "tasks/get", created.TaskID, map[string]any{"taskId": created.TaskID}, &t)
	}
	fmt.Println(t.Status, slices.Sorted(func(yield func(string) bool) {
		for k := range t.InputRequests {
			yield(k)
		}
	}), t.StatusMessage)

	call(srv.URL, "tasks/update", created.TaskID, map[string]any{"taskId": created.TaskID,
		"inputResponses": map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}}, nil)
	for t.Status != "completed" {
		time.Sleep(10 * time.Millisecond)
		call(srv.URL, "tasks/get", created.TaskID, map[string]any{"taskId": created.TaskID}, &t)
	}
	fmt.Println(t.Status, t.Result.Content[0].Text)
	// Output:
	// task working
	// input_required [confirm] waiting for approval
	// completed backed up orders
}

// call sends one 2026-07-28 request declaring the tasks extension and
// decodes its result into out.
func call(url, method, name string, params map[string]any, out any) {
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientInfo":      map[string]any{"name": "example", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{},
			"extensions": map[string]any{task.Extension: map[string]any{}}},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var msg struct {
		Result json.RawMessage
		Error  json.RawMessage
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil || msg.Error != nil {
		panic(fmt.Sprint(err, string(msg.Error)))
	}
	if out != nil {
		if err := json.Unmarshal(msg.Result, out); err != nil {
			panic(err)
		}
	}
}
