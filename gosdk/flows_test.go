package gosdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/reqstate"
)

func TestFlowsThroughGoClient(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		name := "2026-07-28"
		if legacy {
			name = "2025-11-25"
		}
		t.Run(name, func(t *testing.T) {
			e := startServer(t, serverOpts{guard: mrtr.Options{Store: useMemory}})
			var guesses atomic.Int32
			cs := connect(t, e, clientOpts{legacy: legacy, sampling: true, elicit: func(r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				if strings.Contains(r.Params.Message, "guess") || r.Params.Message == "higher" || r.Params.Message == "lower" {
					n := guesses.Add(1) * 3 // 3, 6, 9: lower, then... the secret is 7
					if r.Params.Message == "lower" {
						n = 7
					}
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"guess": n}}, nil
				}
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true, "context": "ctx"}}, nil
			}})

			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: prodArgs})
			if err != nil {
				t.Fatal(err)
			}
			if got := resultText(t, res); !strings.HasPrefix(got, "deployed api to production") {
				t.Fatalf("deploy: %q", got)
			}
			// guess: 3 (higher), 6 (higher), 9 (lower), 7: four answers, round 4.
			res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "guess", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			if got := resultText(t, res); got != "correct: 7 after 4 guesses, round 4" {
				t.Fatalf("guess: %q", got)
			}
			pr, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "context_prompt"})
			if err != nil {
				t.Fatal(err)
			}
			if got := pr.Messages[0].Content.(*mcp.TextContent).Text; got != "context: ctx" {
				t.Fatalf("prompt: %q", got)
			}
			rr, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "test://secret"})
			if err != nil {
				t.Fatal(err)
			}
			if got := rr.Contents[0].Text; got != "secret 42" {
				t.Fatalf("resource: %q", got)
			}
			res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "sample"})
			if err != nil {
				t.Fatal(err)
			}
			if got := resultText(t, res); got != "model said Paris" {
				t.Fatalf("sample: %q", got)
			}
		})
	}
}

func TestTamperEveryByte(t *testing.T) {
	e := startServer(t, serverOpts{})
	cs := connect(t, e, clientOpts{manual: true})
	tok := pauseDeploy(t, cs, prodArgs)
	for i := range len(tok) {
		b := []byte(tok)
		b[i] ^= 0x20
		if b[i] < 0x21 || b[i] > 0x7e {
			b[i] = '~'
		}
		_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: prodArgs,
			RequestState: string(b), InputResponses: accept(map[string]any{"approve": true})})
		wantReject(t, err, mrtr.ReasonInvalid)
	}
	_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: prodArgs,
		RequestState: tok + "-TAMPERED", InputResponses: accept(map[string]any{"approve": true})})
	wantReject(t, err, mrtr.ReasonInvalid)
	if e.runs.Load() != 0 {
		t.Fatalf("a tampered token reached the handler %d times", e.runs.Load())
	}
}

func TestMovedTokens(t *testing.T) {
	ring, _ := reqstate.GenerateKeyRing("shared", nil)
	e := startServer(t, serverOpts{ring: ring})
	alice := connect(t, e, clientOpts{manual: true, path: "/auth/mcp", token: "https://id.example|alice"})
	tok := pauseDeploy(t, alice, prodArgs)
	ans := accept(map[string]any{"approve": true})

	cases := []struct {
		name string
		call func(cs *mcp.ClientSession) error
		cs   *mcp.ClientSession
	}{
		{"other tool", func(cs *mcp.ClientSession) error {
			_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "guess", Arguments: map[string]any{}, RequestState: tok, InputResponses: ans})
			return err
		}, alice},
		{"prompt", func(cs *mcp.ClientSession) error {
			_, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "context_prompt", RequestState: tok, InputResponses: ans})
			return err
		}, alice},
		{"resource", func(cs *mcp.ClientSession) error {
			_, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "test://secret", RequestState: tok, InputResponses: ans})
			return err
		}, alice},
		{"other subject", nil, connect(t, e, clientOpts{manual: true, path: "/auth/mcp", token: "https://id.example|mallory"})},
		{"other issuer", nil, connect(t, e, clientOpts{manual: true, path: "/auth/mcp", token: "https://evil.example|alice"})},
		{"anonymous", nil, connect(t, e, clientOpts{manual: true})},
		{"other server id", nil, connect(t, startServer(t, serverOpts{ring: ring, guard: mrtr.Options{ServerID: "other"}}),
			clientOpts{manual: true, path: "/auth/mcp", token: "https://id.example|alice"})},
		{"other protocol version", nil, connect(t, e, clientOpts{manual: true, legacy: true, path: "/auth/mcp", token: "https://id.example|alice"})},
	}
	for _, c := range cases {
		call := c.call
		if call == nil {
			call = func(cs *mcp.ClientSession) error {
				_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: prodArgs, RequestState: tok, InputResponses: ans})
				return err
			}
		}
		wantReject(t, call(c.cs), mrtr.ReasonInvalid)
	}
	// The rightful caller still completes.
	res, err := alice.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: prodArgs, RequestState: tok, InputResponses: ans})
	if err != nil || !strings.HasPrefix(resultText(t, res), "deployed") {
		t.Fatalf("rightful resume: %v", err)
	}
}

func TestArgumentsExpiryAndRounds(t *testing.T) {
	e := startServer(t, serverOpts{guard: mrtr.Options{MaxRounds: 2, TTL: time.Minute, AnonymousTTL: time.Minute}})
	cs := connect(t, e, clientOpts{manual: true})
	ans := accept(map[string]any{"approve": true})
	tok := pauseDeploy(t, cs, prodArgs)

	_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy",
		Arguments: map[string]any{"service": "api", "env": "staging"}, RequestState: tok, InputResponses: ans})
	wantReject(t, err, mrtr.ReasonArgumentsChanged)

	e.clk.Advance(time.Minute + mrtr.DefaultLeeway + time.Second)
	_, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: prodArgs, RequestState: tok, InputResponses: ans})
	wantReject(t, err, mrtr.ReasonExpired)

	e.clk.Advance(-2 * time.Hour) // now the token looks issued in the future
	_, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: prodArgs, RequestState: tok, InputResponses: ans})
	wantReject(t, err, mrtr.ReasonExpired)
	e.clk.Advance(2 * time.Hour)

	// forever pauses every round: rounds 1 and 2 are sealed, the third pause is refused.
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "forever"})
	for i := 0; err == nil && i < 5; i++ {
		res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "forever", RequestState: res.RequestState, InputResponses: ans})
	}
	wantReject(t, err, mrtr.ReasonRoundsExceeded)
}

func TestSingleUseConcurrentResumes(t *testing.T) {
	e := startServer(t, serverOpts{guard: mrtr.Options{Store: useMemory}})
	cs := connect(t, e, clientOpts{manual: true})
	tok := pauseDeploy(t, cs, prodArgs)
	var ok, replayed atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "deploy", Arguments: prodArgs,
				RequestState: tok, InputResponses: accept(map[string]any{"approve": true})})
			var je *jsonrpc.Error
			switch {
			case err == nil:
				ok.Add(1)
			case errors.As(err, &je) && strings.Contains(string(je.Data), "replayed"):
				replayed.Add(1)
			default:
				t.Errorf("unexpected: %v", err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 || replayed.Load() != 31 || e.runs.Load() != 1 {
		t.Fatalf("ok %d replayed %d handler runs %d; want 1, 31, 1", ok.Load(), replayed.Load(), e.runs.Load())
	}
}

func TestHandlerErrorReleasesToken(t *testing.T) {
	e := startServer(t, serverOpts{guard: mrtr.Options{Store: useMemory}})
	cs := connect(t, e, clientOpts{manual: true})
	tok := pauseDeploy(t, cs, prodArgs)
	params := &mcp.CallToolParams{Name: "deploy", Arguments: prodArgs, RequestState: tok, InputResponses: accept(map[string]any{"approve": true})}
	e.fail.Store(true)
	res, err := cs.CallTool(t.Context(), params)
	if err != nil || !res.IsError {
		t.Fatalf("failing handler: %v %+v", err, res)
	}
	res, err = cs.CallTool(t.Context(), params)
	if err != nil || !strings.HasPrefix(resultText(t, res), "deployed") {
		t.Fatalf("retry after a handler error: %v", err)
	}
	_, err = cs.CallTool(t.Context(), params)
	wantReject(t, err, mrtr.ReasonReplayed)
}

func TestUnaskedAnswersDropped(t *testing.T) {
	e := startServer(t, serverOpts{})
	cs := connect(t, e, clientOpts{manual: true})
	tok := pauseDeploy(t, cs, prodArgs)
	answers := accept(map[string]any{"approve": true})
	answers["extra"] = &mcp.ElicitResult{Action: "accept"}
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: prodArgs, RequestState: tok, InputResponses: answers}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(e.seen, ",") != "confirm" {
		t.Fatalf("handler saw answers %v", e.seen)
	}
	// A missing answer makes the handler ask again, not fail.
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: prodArgs, RequestState: tok,
		InputResponses: mcp.InputResponseMap{"other": &mcp.ElicitResult{Action: "accept"}}})
	if err != nil || !res.NeedsInput() || res.RequestState == "" || res.RequestState == tok {
		t.Fatalf("missing answer: %v %+v", err, res)
	}
}

func TestCapabilityGate(t *testing.T) {
	e := startServer(t, serverOpts{})
	cs := connect(t, e, clientOpts{manual: true, noElicit: true})
	_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: prodArgs})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != -32021 || !strings.Contains(string(je.Data), `"requiredCapabilities":{"elicitation":{"form":{}}}`) {
		t.Fatalf("deploy without elicitation: %v", err)
	}
	_, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "sample"})
	if !errors.As(err, &je) || je.Code != -32021 || !strings.Contains(string(je.Data), `"sampling":{}`) {
		t.Fatalf("sample without sampling: %v", err)
	}
}

func TestHandlerSettingStateByHand(t *testing.T) {
	e := startServer(t, serverOpts{rawState: true})
	cs := connect(t, e, clientOpts{manual: true})
	_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "raw", Arguments: map[string]any{}})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != -32603 || !strings.Contains(je.Message, "requestState") {
		t.Fatalf("raw state: %v", err)
	}
}

// postRaw sends one 2026-07-28 JSON-RPC request as the conformance
// harness does and returns the HTTP status and decoded body.
func postRaw(t *testing.T, url, method, name string, params map[string]any) (int, map[string]any) {
	t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if i := bytes.Index(raw, []byte("data: ")); i >= 0 { // event stream
		raw = raw[i+6:]
		raw = raw[:bytes.IndexByte(raw, '\n')]
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("body %q: %v", raw, err)
	}
	return resp.StatusCode, out
}

func TestNullInputResponsesIsProtocolError(t *testing.T) {
	e := startServer(t, serverOpts{})
	status, out := postRaw(t, e.url+"/mcp", "tools/call", "deploy", map[string]any{"name": "deploy", "arguments": prodArgs, "inputResponses": nil})
	errObj, _ := out["error"].(map[string]any)
	if status != 400 || errObj == nil || errObj["code"] != float64(-32602) {
		t.Fatalf("inputResponses null: HTTP %d %v", status, out)
	}
	// The wire error of a rejected token, as a non-Go client sees it.
	status, out = postRaw(t, e.url+"/mcp", "tools/call", "deploy", map[string]any{"name": "deploy", "arguments": prodArgs,
		"requestState": "v1.test.AAAA", "inputResponses": map[string]any{"confirm": map[string]any{"action": "accept"}}})
	errObj, _ = out["error"].(map[string]any)
	if status != 400 || errObj["message"] != "invalid requestState" || errObj["data"].(map[string]any)["reason"] != "invalid" {
		t.Fatalf("forged token: HTTP %d %v", status, out)
	}
}
