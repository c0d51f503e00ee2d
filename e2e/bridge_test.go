package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The reference servers on npm are 2025-11-25 servers (their SDK is
// @modelcontextprotocol/sdk 1.x); conformance/package.json pins them.
func serverEverything(t testing.TB) (node, script string) {
	t.Helper()
	return referenceServer(t, "server-everything")
}

// referenceServer is the pinned Node and the entry point of the npm
// reference server @modelcontextprotocol/NAME that `make deps` installs.
func referenceServer(t testing.TB, name string) (node, script string) {
	t.Helper()
	return pinnedNode(t, filepath.Join("@modelcontextprotocol", name, "dist", "index.js"))
}

// pinnedNode is the pinned Node and the path of script (relative to
// conformance/node_modules) of an npm package conformance/package.json
// pins, after checking that `make deps` installed both.
func pinnedNode(t testing.TB, script string) (node, path string) {
	t.Helper()
	needHarness(t)
	dir := filepath.Join(repoRoot, "conformance", "node_modules")
	path = filepath.Join(dir, script)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is not installed (run make deps): %v", script, err)
	}
	return filepath.Join(dir, ".bin", "node"), path
}

// sealedOnly is an HTTP transport that fails the test when a response
// through the proxy carries a requestState that is not an mrtr token or
// names the bridge's hold (which only the sealed token may carry). It
// checks each line of a body as it passes, so event streams that stay
// open flow through unbuffered.
type sealedOnly struct {
	t      *testing.T
	mu     sync.Mutex
	tokens int
}

func (s *sealedOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &sealedBody{ReadCloser: resp.Body, s: s}
	return resp, nil
}

// sealed is how many requestStates the responses carried so far.
func (s *sealedOnly) sealed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens
}

// check checks one line of a response body.
func (s *sealedOnly) check(line []byte) {
	if bytes.Contains(line, []byte("bridge:")) {
		s.t.Errorf("a response shows the bridge's own state: %s", line)
	}
	line = bytes.TrimPrefix(line, []byte("data: "))
	var msg struct {
		Result struct {
			RequestState *string `json:"requestState"`
		} `json:"result"`
	}
	if json.Unmarshal(line, &msg) == nil && msg.Result.RequestState != nil {
		if !strings.HasPrefix(*msg.Result.RequestState, "v1.") {
			s.t.Errorf("an unsealed requestState reached the client: %q", *msg.Result.RequestState)
		}
		s.mu.Lock()
		s.tokens++
		s.mu.Unlock()
	}
}

// sealedBody hands each complete line read through it to s.check.
type sealedBody struct {
	io.ReadCloser
	s    *sealedOnly
	line []byte
}

func (b *sealedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.line = append(b.line, p[:n]...)
	for {
		i := bytes.IndexByte(b.line, '\n')
		if i < 0 {
			break
		}
		b.s.check(b.line[:i])
		b.line = b.line[i+1:]
	}
	if err != nil && len(b.line) > 0 {
		b.s.check(b.line)
		b.line = nil
	}
	return n, err
}

// TestBridgeServerEverything: a 2026-07-28 client (go-sdk v1.8.0, its own
// multi-round loop) completes server-everything's elicitation and
// sampling tools through `mrtr proxy -- node .../server-everything stdio`,
// every round sealed, and its roots tool gets the operator's --roots, not
// the client's; the child never sees an MRTR_* variable.
func TestBridgeServerEverything(t *testing.T) {
	node, script := serverEverything(t)
	url := startProxy(t, "--roots", "file:///srv/operator", "--", node, script, "stdio")
	seal := &sealedOnly{t: t}
	client := mcp.NewClient(&mcp.Implementation{Name: "bridge-e2e", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada Lovelace", "check": true, "email": "ada@example.com", "integer": 7}}, nil
		},
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model", Content: &mcp.TextContent{Text: "sampled by the test"}}, nil
		},
	})
	client.AddRoots(&mcp.Root{URI: "file:///srv/project", Name: "project"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: seal}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"trigger-elicitation-request", map[string]any{}, "Ada Lovelace"},
		{"trigger-sampling-request", map[string]any{"prompt": "hello", "maxTokens": 10}, "sampled by the test"},
		{"get-roots-list", map[string]any{}, "file:///srv/operator"},
		{"get-env", map[string]any{}, "PATH"},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		text := toolText(res)
		if res.IsError || !strings.Contains(text, c.want) {
			t.Fatalf("%s: want %q in the result, got %s", c.tool, c.want, text)
		}
		if strings.Contains(text, "file:///srv/project") {
			t.Fatalf("%s: the client's roots reached the child: %s", c.tool, text)
		}
		if c.tool == "get-env" && strings.Contains(text, "MRTR_") {
			t.Fatalf("the child sees MRTR_* variables: %s", text)
		}
	}
	if n := seal.sealed(); n < 2 {
		t.Fatalf("%d sealed rounds seen, want one per input-asking tool at least", n)
	}
}

func toolText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// bridgeCall is one raw 2026-07-28 tools/call through the proxy.
func bridgeCall(t *testing.T, url, bearer, tool string, args map[string]any, state string, answers map[string]any) (result map[string]json.RawMessage, errData string) {
	t.Helper()
	res, e := bridgeRPC(t, context.Background(), url, bearer, tool, args, state, answers)
	if e != nil {
		return nil, fmt.Sprintf("%d %s", e.Code, e.Data)
	}
	return res, ""
}

// rpcError is a JSON-RPC error object as the tests read it.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// bridgeRPC sends one raw 2026-07-28 tools/call to url, bounded by ctx, as
// a client declaring elicitation and sampling, and returns its result or
// its error (the response of id 1, from JSON or an event stream).
func bridgeRPC(t testing.TB, ctx context.Context, url, bearer, tool string, args map[string]any, state string, answers map[string]any) (map[string]json.RawMessage, *rpcError) {
	t.Helper()
	params := map[string]any{"name": tool, "arguments": args, "_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}, "sampling": map[string]any{}},
	}}
	if state != "" {
		params["requestState"] = state
		params["inputResponses"] = answers
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s on %s: %v", tool, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return rpcResponse(t, tool+" on "+url, raw)
}

// rpcResponse decodes the response of id 1 from a JSON body or an event
// stream: its result or its error; anything else fails t.
func rpcResponse(t testing.TB, what string, raw []byte) (map[string]json.RawMessage, *rpcError) {
	t.Helper()
	msg := raw
	for _, l := range bytes.Split(raw, []byte("\n")) {
		if d, ok := bytes.CutPrefix(l, []byte("data: ")); ok && bytes.Contains(d, []byte(`"id":1`)) {
			msg = d
		}
	}
	var m struct {
		Result map[string]json.RawMessage `json:"result"`
		Error  *rpcError                  `json:"error"`
	}
	if err := json.Unmarshal(msg, &m); err != nil || (m.Result == nil) == (m.Error == nil) {
		t.Fatalf("%s: not a JSON-RPC response (%v): %s", what, err, raw)
	}
	return m.Result, m.Error
}

// TestBridgeAttacks: through the bridge, tampered, moved, replayed,
// changed-argument and other-caller tokens are refused before the held
// call sees them, and a caller's flows never mix with another's: 24 flows,
// 8 at a time, each get their own answer back.
func TestBridgeAttacks(t *testing.T) {
	node, script := serverEverything(t)
	const secret = "bridge-e2e-secret-of-at-least-32-bytes!"
	// 8 flows at a time, of two callers, in any mix: each may hold 8.
	url := startProxy(t, "--auth-hs256-secret", secret, "--max-procs-per-caller", "8", "--", node, script, "stdio")
	mint := func(sub string) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	alice, mallory := mint("alice"), mint("mallory")
	pause := func(bearer string, args map[string]any) (string, string) {
		t.Helper()
		res, e := bridgeCall(t, url, bearer, "trigger-elicitation-request", args, "", nil)
		var st string
		json.Unmarshal(res["requestState"], &st)
		var irs map[string]json.RawMessage
		json.Unmarshal(res["inputRequests"], &irs)
		if e != "" || st == "" || len(irs) == 0 {
			t.Fatalf("pause: %v %s", res, e)
		}
		var k string
		for k = range irs {
		}
		return st, k
	}
	accept := func(k string) map[string]any {
		return map[string]any{k: map[string]any{"action": "accept", "content": map[string]any{"name": "Ada", "check": true}}}
	}
	flip := func(s string) string {
		b := []byte(s)
		i := len(b) / 2
		b[i] ^= 1
		if b[i] == '.' || b[i] == '/' {
			b[i] = 'A'
		}
		return string(b)
	}
	empty := map[string]any{}
	for name, try := range map[string]func(st, k string) string{
		"tampered": func(st, k string) string {
			_, e := bridgeCall(t, url, alice, "trigger-elicitation-request", empty, flip(st), accept(k))
			return e
		},
		"moved": func(st, k string) string {
			_, e := bridgeCall(t, url, alice, "trigger-sampling-request", map[string]any{"prompt": "x"}, st, accept(k))
			return e
		},
		"arguments changed": func(st, k string) string {
			_, e := bridgeCall(t, url, alice, "trigger-elicitation-request", map[string]any{"x": 1}, st, accept(k))
			return e
		},
		"another caller": func(st, k string) string {
			_, e := bridgeCall(t, url, mallory, "trigger-elicitation-request", empty, st, accept(k))
			return e
		},
	} {
		st, k := pause(alice, empty)
		if e := try(st, k); !strings.HasPrefix(e, "-32602") {
			t.Errorf("%s: want -32602, got %q", name, e)
		}
		// The held call is intact: the genuine resume still completes.
		if res, e := bridgeCall(t, url, alice, "trigger-elicitation-request", empty, st, accept(k)); e != "" || !strings.Contains(string(res["content"]), "Ada") {
			t.Errorf("%s: the genuine resume afterwards: %v %s", name, res, e)
		}
	}
	st, k := pause(alice, empty)
	if _, e := bridgeCall(t, url, alice, "trigger-elicitation-request", empty, st, accept(k)); e != "" {
		t.Fatalf("resume: %s", e)
	}
	if _, e := bridgeCall(t, url, alice, "trigger-elicitation-request", empty, st, accept(k)); !strings.Contains(e, "replayed") {
		t.Fatalf("replay: want replayed, got %q", e)
	}

	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			who := []string{alice, mallory}[i%2]
			name := fmt.Sprintf("person-%d", i)
			res, e := bridgeCall(t, url, who, "trigger-elicitation-request", empty, "", nil)
			var st string
			json.Unmarshal(res["requestState"], &st)
			var irs map[string]json.RawMessage
			json.Unmarshal(res["inputRequests"], &irs)
			if e != "" || st == "" {
				t.Errorf("flow %d pause: %s", i, e)
				return
			}
			answers := map[string]any{}
			for k := range irs {
				answers[k] = map[string]any{"action": "accept", "content": map[string]any{"name": name, "check": true}}
			}
			for round := 0; round < 4; round++ {
				res, e = bridgeCall(t, url, who, "trigger-elicitation-request", empty, st, answers)
				if e != "" {
					t.Errorf("flow %d resume: %s", i, e)
					return
				}
				if string(res["resultType"]) != `"input_required"` {
					break
				}
				// Another round (roots/list right after the session
				// started): answer it too.
				json.Unmarshal(res["requestState"], &st)
				json.Unmarshal(res["inputRequests"], &irs)
				answers = map[string]any{}
				for k, ir := range irs {
					if bytes.Contains(ir, []byte("roots/list")) {
						answers[k] = map[string]any{"roots": []any{}}
					} else {
						answers[k] = map[string]any{"action": "accept", "content": map[string]any{"name": name, "check": true}}
					}
				}
			}
			if !strings.Contains(string(res["content"]), name) {
				t.Errorf("flow %d got someone else's answer: %s", i, res["content"])
			}
		}()
	}
	wg.Wait()
}
