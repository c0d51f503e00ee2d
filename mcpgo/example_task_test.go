package mcpgo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/mcpgo"
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
	s := server.NewMCPServer("backups", "1.0.0", server.WithToolCapabilities(false))
	tasks := task.NewManager(task.NewMemory(nil), &task.Options{AnswerPoll: 10 * time.Millisecond})
	a := mcpgo.Install(s, mrtr.New(reqstate.New(ring, nil), nil), &mcpgo.Options{Tasks: tasks})

	type Backup struct {
		DB string `json:"db"`
	}
	mcpgo.AddTool(a, mcp.NewTool("backup", mcp.WithDescription("back up a database"), mcp.WithString("db")),
		func(ctx context.Context, req mcp.CallToolRequest, args Backup, flow *mcpgo.ToolFlow[struct{}]) (*mcp.CallToolResult, error) {
			return flow.RunTask(ctx, &mcpgo.TaskOptions{TTL: time.Hour, PollInterval: time.Second},
				func(ctx context.Context, t *mcpgo.Task) (*mcp.CallToolResult, error) {
					_ = t.SetStatus(ctx, "waiting for approval")
					ans, err := t.Ask(ctx, mcp.InputRequests{"confirm": mcp.NewElicitationInputRequest(mcp.ElicitationParams{
						Message:         "Back up " + args.DB + " now?",
						RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}},
					})})
					if err != nil {
						return nil, err // cancelled, or the TTL passed
					}
					if content, _ := ans["confirm"].Elicitation.Content.(map[string]any); content["ok"] != true {
						return mcp.NewToolResultError("not approved"), nil
					}
					_ = t.SetStatus(ctx, "copying")
					return mcp.NewToolResultText("backed up " + args.DB), nil
				})
		})
	srv := httptest.NewServer(mcpgo.NewHTTPHandler(a)) // tasks need Handler
	defer srv.Close()

	// The client's side, as plain 2026-07-28 requests.
	var created struct{ ResultType, TaskID, Status string }
	taskCall(srv.URL, "tools/call", "backup", map[string]any{"name": "backup", "arguments": map[string]any{"db": "orders"}}, &created)
	fmt.Println(created.ResultType, created.Status)

	onTask := func(method string, params map[string]any, out any) {
		params["taskId"] = created.TaskID
		taskCall(srv.URL, method, created.TaskID, params, out)
	}
	var t struct {
		Status, StatusMessage string
		InputRequests         map[string]json.RawMessage
		Result                struct{ Content []struct{ Text string } }
	}
	poll := func(status string) {
		for t.Status != status {
			time.Sleep(10 * time.Millisecond) // a real client waits pollIntervalMs
			onTask("tasks/get", map[string]any{}, &t)
		}
	}
	poll("input_required")
	fmt.Println(t.Status, slices.Sorted(maps.Keys(t.InputRequests)), t.StatusMessage)
	onTask("tasks/update", map[string]any{"inputResponses": map[string]any{
		"confirm": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}}, nil)
	poll("completed")
	fmt.Println(t.Status, t.Result.Content[0].Text)
	// Output:
	// task working
	// input_required [confirm] waiting for approval
	// completed backed up orders
}

// taskCall sends one 2026-07-28 request declaring the tasks extension and
// decodes its result into out.
func taskCall(url, method, name string, params map[string]any, out any) {
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{},
			"extensions": map[string]any{task.Extension: map[string]any{}}},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req := httptest.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.RequestURI = "" // a client's request
	req.Header = http.Header{"Content-Type": {"application/json"}, "Mcp-Protocol-Version": {"2026-07-28"},
		"Mcp-Method": {method}, "Mcp-Name": {name}}
	var msg struct{ Result, Error json.RawMessage }
	if resp, err := http.DefaultClient.Do(req); err != nil {
		panic(err)
	} else if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil || msg.Error != nil || resp.Body.Close() != nil {
		panic(fmt.Sprint(err, string(msg.Error)))
	}
	if out != nil && json.Unmarshal(msg.Result, out) != nil {
		panic("not the expected result: " + string(msg.Result))
	}
}
