package call

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/task"
)

// TestMessages: a CreateTaskResult is found in a JSON body and in an
// event stream, after other events; a body without one is an error.
func TestMessages(t *testing.T) {
	created := `{"jsonrpc":"2.0","id":3,"result":{"resultType":"task","taskId":"T1","status":"working","pollIntervalMs":250}}`
	for name, body := range map[string]string{
		"json":   created,
		"stream": "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\nid: 2\ndata: " + created + "\n\n",
	} {
		tap := &taskTap{body: []byte(body)}
		got, err := tap.created()
		if err != nil || got.TaskID != "T1" || got.Status != "working" || got.PollIntervalMs != 250 {
			t.Errorf("%s: %+v %v", name, got, err)
		}
	}
	tap := &taskTap{body: []byte(`{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`)}
	if _, err := tap.created(); err == nil {
		t.Error("a body with no task: no error")
	}
}

// TestDeclareTasks: the extension is declared in tools/call's per-request
// capabilities, beside what go-sdk put there, and on no other request;
// the declared _meta is what the tasks/* requests carry.
func TestDeclareTasks(t *testing.T) {
	tc := &taskClient{}
	var sent []mcp.Params
	next := func(_ context.Context, _ string, req mcp.Request) (mcp.Result, error) {
		sent = append(sent, req.GetParams())
		return nil, nil
	}
	meta := func() mcp.Meta {
		return mcp.Meta{mcp.MetaKeyProtocolVersion: "2026-07-28", mcp.MetaKeyClientCapabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}}
	}
	h := tc.declareTasks(next)
	h(t.Context(), "tools/list", &mcp.ClientRequest[*mcp.ListToolsParams]{Params: &mcp.ListToolsParams{Meta: meta()}})
	h(t.Context(), "prompts/get", &mcp.ClientRequest[*mcp.GetPromptParams]{Params: &mcp.GetPromptParams{Meta: meta()}})
	if tc.meta != nil {
		t.Fatal("declared on a request other than tools/call")
	}
	h(t.Context(), "tools/call", &mcp.ClientRequest[*mcp.CallToolParams]{Params: &mcp.CallToolParams{Name: "x", Meta: meta()}})
	for i, p := range sent {
		b, _ := json.Marshal(p)
		declared := strings.Contains(string(b), `"extensions":{"`+task.Extension+`":{}}`)
		if declared != (i == 2) || !strings.Contains(string(b), `"elicitation":{`) {
			t.Errorf("request %d sent %s", i, b)
		}
	}
	if b, _ := json.Marshal(tc.meta); !strings.Contains(string(b), task.Extension) || !strings.Contains(string(b), "2026-07-28") {
		t.Errorf("the tasks/* _meta: %s", b)
	}
}

// fakeTasks is a server of one task that asks for confirm, shows the same
// question on the next poll too (its update not applied yet), then
// completes with what it was told, or ends as end says.
type fakeTasks struct {
	t   *testing.T
	end string // "", "failed" or "never"

	mu      sync.Mutex
	polls   int
	updates []map[string]json.RawMessage
	cancels int
}

func (f *fakeTasks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			TaskID         string                     `json:"taskId"`
			InputResponses map[string]json.RawMessage `json:"inputResponses"`
			Meta           map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	json.NewDecoder(r.Body).Decode(&req)
	if r.Header.Get("Mcp-Method") != req.Method || r.Header.Get("Mcp-Name") != "T1" || req.Params.TaskID != "T1" ||
		!strings.Contains(string(req.Params.Meta[mcp.MetaKeyClientCapabilities]), task.Extension) {
		f.t.Errorf("%s: headers %v, params %+v", req.Method, r.Header, req.Params)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	result := `{}`
	switch req.Method {
	case task.MethodGet:
		f.polls++
		ask := `"status":"input_required","inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"Sure?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}}`
		switch {
		case len(f.updates) == 0 || f.polls == 2 || f.end == "never":
			result = `{"taskId":"T1","pollIntervalMs":1,` + ask + `}`
		case f.end == "failed":
			result = `{"taskId":"T1","status":"failed","statusMessage":"broke","error":{"code":-32603,"message":"it broke"}}`
		default:
			text, _ := json.Marshal("told " + string(f.updates[0]["confirm"]))
			result = fmt.Sprintf(`{"taskId":"T1","status":"completed","result":{"content":[{"type":"text","text":%s}]}}`, text)
		}
	case task.MethodUpdate:
		f.updates = append(f.updates, req.Params.InputResponses)
	case task.MethodCancel:
		f.cancels++
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n\n", req.ID, result)
}

func followFake(t *testing.T, ctx context.Context, end, stdin string) (*fakeTasks, *mcp.CallToolResult, string, error) {
	f := &fakeTasks{t: t, end: end}
	srv := httptest.NewServer(f)
	defer srv.Close()
	var stderr, stdout strings.Builder
	in := &inputs{p: newPrompter(strings.NewReader(stdin), &stdout), atPrompt: func(ctx context.Context, ask func(context.Context) error) error { return ask(ctx) }}
	tc := &taskClient{endpoint: srv.URL, http: srv.Client(), stderr: &stderr, max: 5, answer: in.answer,
		meta: map[string]any{mcp.MetaKeyProtocolVersion: "2026-07-28",
			mcp.MetaKeyClientCapabilities: map[string]any{"extensions": map[string]any{task.Extension: map[string]any{}}}}}
	res, err := tc.follow(ctx, &wireTask{TaskID: "T1", Status: "working", PollIntervalMs: 1})
	return f, res, stderr.String() + stdout.String(), err
}

// TestFollow: a task is polled to its end; its question is asked at the
// prompt once, though two polls show it, and answered with tasks/update;
// its result is the completed call's. A failed task is its JSON-RPC
// error; a follow that ends early (Ctrl-C, --timeout) cancels the task.
func TestFollow(t *testing.T) {
	f, res, out, err := followFake(t, t.Context(), "", "y\n")
	if err != nil || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != `told {"action":"accept","content":{"ok":true}}` {
		t.Fatalf("%+v %v\n%s", res, err, out)
	}
	if len(f.updates) != 1 || strings.Count(out, "Sure?") != 1 || f.cancels != 0 {
		t.Fatalf("%d updates, %d cancels, the question shown %d times:\n%s", len(f.updates), f.cancels, strings.Count(out, "Sure?"), out)
	}
	if !strings.Contains(out, "task T1: working\n") || !strings.Contains(out, "task: input_required\n") || !strings.Contains(out, "task: completed\n") {
		t.Fatalf("status lines:\n%s", out)
	}

	f, _, out, err = followFake(t, t.Context(), "failed", "y\n")
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != -32603 || f.cancels != 0 || !strings.Contains(out, "task: failed: broke\n") {
		t.Fatalf("failed task: %v, %d cancels\n%s", err, f.cancels, out)
	}

	ctx, cancel := context.WithCancelCause(t.Context())
	pr, pw := io.Pipe()
	defer pw.Close()
	done := make(chan error, 1)
	go func() {
		// Nobody answers the prompt; the call is left while it shows.
		fk := &fakeTasks{t: t, end: "never"}
		srv := httptest.NewServer(fk)
		defer srv.Close()
		var stdout strings.Builder
		in := &inputs{p: newPrompter(pr, &stdout), atPrompt: func(ctx context.Context, ask func(context.Context) error) error { return ask(ctx) }}
		tc := &taskClient{endpoint: srv.URL, http: srv.Client(), stderr: io.Discard, max: 5, answer: in.answer,
			meta: map[string]any{mcp.MetaKeyClientCapabilities: map[string]any{"extensions": map[string]any{task.Extension: map[string]any{}}}}}
		_, err := tc.follow(ctx, &wireTask{TaskID: "T1", Status: "working", PollIntervalMs: 1})
		fk.mu.Lock()
		if fk.cancels != 1 {
			err = fmt.Errorf("%d tasks/cancel sent, want 1 (%v)", fk.cancels, err)
		}
		fk.mu.Unlock()
		done <- err
	}()
	errLeft := errors.New("left")
	cancel(errLeft)
	if err := <-done; !errors.Is(err, errLeft) {
		t.Fatalf("a follow left: %v", err)
	}
}
