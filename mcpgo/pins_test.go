package mcpgo_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/testing/adaptertest"
	"github.com/mrtr-go/mrtr/mcpgo"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// pinServer is an mcp-go server, served through mcpgo's handler on
// loopback, with the fixtures of this file's tests, and the codec its
// guard seals with (to mint a token as a server before a fix would have).
type pinServer struct {
	url   string
	codec *reqstate.AESGCM

	mu      sync.Mutex
	deleted []int64 // the records delete_record deleted, in order
}

func (p *pinServer) deletedRecords() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int64(nil), p.deleted...)
}

func startPins(t *testing.T) *pinServer {
	t.Helper()
	ring, err := reqstate.GenerateKeyRing("pins", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &pinServer{codec: reqstate.New(ring, nil)}
	g := mrtr.New(p.codec, &mrtr.Options{Store: replay.NewMemory(nil)})
	s := server.NewMCPServer("mrtr-pins", "1", server.WithToolCapabilities(false), server.WithPromptCapabilities(false))
	a := mcpgo.Install(s, g, nil)

	// delete_record binds its arguments on every round, as a handler that
	// trusts the arguments hash does: round 1 asks to confirm the id it
	// bound, the resume deletes the id it binds then.
	type recordArgs struct {
		ID int64 `json:"id"`
	}
	mcpgo.AddTool(a, mcp.NewTool("delete_record", mcp.WithNumber("id")),
		func(ctx context.Context, req mcp.CallToolRequest, args recordArgs, flow *mcpgo.ToolFlow[int64]) (*mcp.CallToolResult, error) {
			if ans, ok := flow.Elicited("confirm"); ok && approved(ans) {
				p.mu.Lock()
				p.deleted = append(p.deleted, args.ID)
				p.mu.Unlock()
				return mcp.NewToolResultText(fmt.Sprintf("deleted record %d", args.ID)), nil
			}
			return flow.Ask(args.ID, confirm(fmt.Sprintf("delete record %d?", args.ID)))
		})

	// elicit_url asks an elicitation with a url and an elicitationId but
	// no mode; elicit_form one with no mode and no url, form mode.
	mcpgo.AddTool(a, mcp.NewTool("elicit_url"),
		func(ctx context.Context, req mcp.CallToolRequest, args struct{}, flow *mcpgo.ToolFlow[string]) (*mcp.CallToolResult, error) {
			return flow.Ask("url", mcp.InputRequests{"login": mcp.NewElicitationInputRequest(mcp.ElicitationParams{
				Message: "sign in", URL: "https://id.example/login", ElicitationID: "e1"})})
		})
	mcpgo.AddTool(a, mcp.NewTool("elicit_form"),
		func(ctx context.Context, req mcp.CallToolRequest, args struct{}, flow *mcpgo.ToolFlow[string]) (*mcp.CallToolResult, error) {
			return flow.Ask("form", mcp.InputRequests{"confirm": mcp.NewElicitationInputRequest(mcp.ElicitationParams{
				Message: "sure?", RequestedSchema: adaptertest.ConfirmSchema()})})
		})

	// topic_prompt takes an argument; resumed with an accepted answer it
	// writes the topic it was asked for.
	mcpgo.AddPrompt(a, mcp.NewPrompt("topic_prompt", mcp.WithArgument("topic")),
		func(ctx context.Context, req mcp.GetPromptRequest, flow *mcpgo.PromptFlow[string]) (*mcp.GetPromptResult, error) {
			if ans, ok := flow.Elicited("confirm"); ok && approved(ans) {
				return mcp.NewGetPromptResult("topic", []mcp.PromptMessage{
					mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("topic: "+req.Params.Arguments["topic"]))}), nil
			}
			return flow.Ask(req.Params.Arguments["topic"], confirm("write about "+req.Params.Arguments["topic"]+"?"))
		})

	// raw_prompt is registered on the server directly, bypassing the
	// adapter, and sets a requestState by hand.
	s.AddPrompt(mcp.NewPrompt("raw_prompt"), func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return server.NewInputRequestBuilder("step=1").Elicit("confirm", mcp.ElicitationParams{Message: "?", RequestedSchema: adaptertest.ConfirmSchema()}).PromptResult(), nil
	})

	srv := httptest.NewServer(mcpgo.NewHTTPHandler(a)) // binds 127.0.0.1
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

var approve = map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}

// TestFoldedNameArguments pins issue 18, item 3 through mcp-go:
// BindArguments is encoding/json, which matches member names
// case-insensitively with the last one winning, so {"ID":2,"id":1} binds
// id 1 and {"id":1,"ID":2} id 2, while RFC 8785 gives both one hash.
// Before the fix round 1 asked "delete record 1?" and the resume with the
// names swapped deleted record 2. Now such arguments are refused with
// -32602 on round 1, and a token sealed for them before the fix is
// refused on the resume: no record is deleted.
func TestFoldedNameArguments(t *testing.T) {
	p := startPins(t)
	c := &adaptertest.Client{URL: p.url}
	call := func(args string, extra map[string]any) adaptertest.Response {
		params := map[string]any{"name": "delete_record", "arguments": json.RawMessage(args)}
		for k, v := range extra {
			params[k] = v
		}
		return c.Call(t, "tools/call", params)
	}
	wantRefused := func(what string, r adaptertest.Response) {
		t.Helper()
		if r.Error == nil || r.Error.Code != mrtr.CodeInvalidParams || r.Error.Message == mrtr.RejectMessage ||
			!strings.Contains(r.Error.Message, "differ only in case") || r.Status != 400 {
			t.Fatalf("%s: %v, want HTTP 400 -32602 naming the rule", what, r)
		}
	}

	wantRefused("round 1", call(`{"ID":2,"id":1}`, nil))

	// A token round 1 sealed before the fix: the hash of the canonical form.
	canonical, err := reqstate.Canonicalize([]byte(`{"ID":2,"id":1}`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := p.codec.Seal(reqstate.Binding{Method: "tools/call", ProtocolVersion: "2026-07-28", Target: "delete_record", ServerID: mrtr.DefaultServerID},
		&reqstate.State{Continuation: json.RawMessage(`1`), Round: 1, IssuedAt: now, ExpiresAt: now.Add(time.Minute),
			FlowID: reqstate.ID{1}, ArgsHash: sha256.Sum256(canonical), Asked: []string{"confirm"}})
	if err != nil {
		t.Fatal(err)
	}
	wantRefused("resume with the names swapped", call(`{"id":1,"ID":2}`, map[string]any{"requestState": tok, "inputResponses": approve}))
	wantRefused("resume with the sealed arguments", call(`{"ID":2,"id":1}`, map[string]any{"requestState": tok, "inputResponses": approve}))
	if got := p.deletedRecords(); len(got) != 0 {
		t.Fatalf("records deleted: %v", got)
	}

	// One name per object still runs the flow.
	r := call(`{"id":1}`, nil)
	if r.State() == "" || !strings.Contains(r.String(), "delete record 1?") {
		t.Fatalf("round 1 with one id: %v", r)
	}
	wantRefused("resume adding ID", call(`{"id":1,"ID":2}`, map[string]any{"requestState": r.State(), "inputResponses": approve}))
	if r := call(`{"id":1}`, map[string]any{"requestState": r.State(), "inputResponses": approve}); r.Text() != "deleted record 1" {
		t.Fatalf("resume: %v", r)
	}
	if got := p.deletedRecords(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("records deleted: %v, want [1]", got)
	}
}

// TestPromptArgumentsBound pins the mutation audit's "prompt arguments not
// hashed": a prompts/get resume with other arguments than its round 1 is
// refused arguments_changed, and with its own it resumes.
func TestPromptArgumentsBound(t *testing.T) {
	p := startPins(t)
	c := &adaptertest.Client{URL: p.url}
	r := c.Call(t, "prompts/get", map[string]any{"name": "topic_prompt", "arguments": map[string]any{"topic": "cats"}})
	if r.State() == "" || r.Result["resultType"] != "input_required" {
		t.Fatalf("prompt did not pause: %v", r)
	}
	resume := func(args map[string]any) adaptertest.Response {
		params := map[string]any{"name": "topic_prompt", "requestState": r.State(), "inputResponses": approve}
		if args != nil {
			params["arguments"] = args
		}
		return c.Call(t, "prompts/get", params)
	}
	for _, args := range []map[string]any{{"topic": "dogs"}, {"topic": "cats", "extra": "x"}, nil} {
		got := resume(args)
		if got.Error == nil || got.Error.Code != mrtr.CodeInvalidParams || got.Error.Message != mrtr.RejectMessage || got.Error.Reason() != string(mrtr.ReasonArgumentsChanged) {
			t.Fatalf("resume with arguments %v: %v, want -32602 reason arguments_changed", args, got)
		}
	}
	got := resume(map[string]any{"topic": "cats"})
	if msgs, _ := got.Result["messages"].([]any); len(msgs) != 1 || !strings.Contains(fmt.Sprint(msgs[0]), "topic: cats") {
		t.Fatalf("resume with the sealed arguments: %v", got)
	}
}

// TestPromptStateGuard pins the mutation audit's "prompt state guard not
// installed": Install's prompt middleware refuses a prompt result whose
// requestState nobody sealed (a handler registered on the server directly
// that sets one by hand), as its tool middleware does for tools. And the
// guard checks a prompt's incoming requestState: forged, tampered or
// truncated, it is refused invalid.
func TestPromptStateGuard(t *testing.T) {
	p := startPins(t)
	c := &adaptertest.Client{URL: p.url}
	r := c.Call(t, "prompts/get", map[string]any{"name": "raw_prompt"})
	if r.Error == nil || r.Error.Code != mrtr.CodeInternalError || !strings.Contains(r.Error.Message, "requestState") || strings.Contains(r.String(), "step=1") {
		t.Fatalf("hand-set prompt state: %v, want -32603 without the state", r)
	}

	args := map[string]any{"topic": "cats"}
	r = c.Call(t, "prompts/get", map[string]any{"name": "topic_prompt", "arguments": args})
	tok := r.State()
	if tok == "" {
		t.Fatalf("prompt did not pause: %v", r)
	}
	b := []byte(tok)
	b[len(b)/2] ^= 1
	for what, st := range map[string]string{"forged": "v1.pins.AAAA", "tampered": string(b), "truncated": tok[:len(tok)-1], "hand-set": "step=1"} {
		got := c.Call(t, "prompts/get", map[string]any{"name": "topic_prompt", "arguments": args, "requestState": st, "inputResponses": approve})
		if got.Error == nil || got.Error.Code != mrtr.CodeInvalidParams || got.Error.Message != mrtr.RejectMessage || got.Error.Reason() != string(mrtr.ReasonInvalid) {
			t.Fatalf("%s prompt state: %v, want -32602 reason invalid", what, got)
		}
	}
}

// TestURLElicitationGate pins the mutation audit's "URL elicitation without
// a mode member gated as form": an elicitation that carries a url is URL
// mode for the capability gate even without "mode" (as internal/mcpwire
// and the go-sdk adapter judge it: the client would be handed a link to
// open), so a client that declared only form mode gets -32021 naming
// elicitation.url, and one that declared url mode is asked. One without
// mode and without url is form mode, as the spec's default.
func TestURLElicitationGate(t *testing.T) {
	p := startPins(t)
	for _, c := range []struct {
		tool string
		caps map[string]any
		lack string // "" when the call pauses
	}{
		{"elicit_url", map[string]any{"elicitation": map[string]any{}}, "url"},
		{"elicit_url", map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}, "url"},
		{"elicit_url", map[string]any{"elicitation": map[string]any{"url": map[string]any{}}}, ""},
		{"elicit_form", map[string]any{"elicitation": map[string]any{}}, ""},
		{"elicit_form", map[string]any{"elicitation": map[string]any{"url": map[string]any{}}}, "form"},
	} {
		cl := &adaptertest.Client{URL: p.url, Caps: c.caps}
		r := cl.Call(t, "tools/call", map[string]any{"name": c.tool, "arguments": map[string]any{}})
		if c.lack == "" {
			if r.Error != nil || r.State() == "" {
				t.Errorf("%s with %v: %v, want a pause", c.tool, c.caps, r)
			}
			continue
		}
		want := `"requiredCapabilities":{"elicitation":{"` + c.lack + `":{}}}`
		if r.Error == nil || r.Error.Code != -32021 || !strings.Contains(string(r.Error.Data), want) {
			t.Errorf("%s with %v: %v, want -32021 with %s", c.tool, c.caps, r, want)
		}
	}
}
