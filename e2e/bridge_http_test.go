package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// startHTTPUpstream runs cmd, an MCP server listening on addr, and waits
// until it accepts connections (readiness, not a timing check). It is
// stopped by its pid at cleanup.
func startHTTPUpstream(t *testing.T, cmd *exec.Cmd, addr string) {
	t.Helper()
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	for deadline := time.Now().Add(60 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-exited:
			t.Fatalf("%s exited: %s", filepath.Base(cmd.Path), logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not listening on %s after 60 s: %s", filepath.Base(cmd.Path), addr, logs.String())
		}
	}
}

// serverEverythingHTTP runs npm's server-everything over Streamable HTTP
// (dist/transports/streamableHttp.js: PORT, path /mcp) and returns its URL.
func serverEverythingHTTP(t *testing.T) string {
	t.Helper()
	node, script := serverEverything(t)
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(node, script, "streamableHttp")
	cmd.Env = append(serverEnv(), "PORT="+port)
	startHTTPUpstream(t, cmd, addr)
	return "http://" + addr + "/mcp"
}

// legacyEverything is go-sdk's conformance everything-server v1.4.1, a
// 2025-11-25-only server, which scripts/everything-setup.sh (`make deps`)
// installs; t is skipped (or failed, with MRTR_REQUIRE_CONFORMANCE=1)
// without it.
func legacyEverything(t *testing.T) string {
	t.Helper()
	everythingSetup.need(t)
	return filepath.Join(repoRoot, "conformance", "bin", "everything-server-v1.4.1")
}

// bridgedClient connects a 2026-07-28 go-sdk v1.8.0 client (its own
// multi-round loop) to url, every response checked by seal.
func bridgedClient(t *testing.T, ctx context.Context, url string, seal http.RoundTripper) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "bridge-http-e2e", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada Lovelace", "username": "ada", "check": true, "email": "ada@example.com", "integer": 7}}, nil
		},
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model", Content: &mcp.TextContent{Text: "sampled by the test"}}, nil
		},
	})
	client.AddRoots(&mcp.Root{URI: "file:///srv/project", Name: "project"})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: seal}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("the client speaks %s through the bridge, want 2026-07-28", v)
	}
	return cs
}

// bearer adds a bearer token to every request.
type bearer struct {
	next  http.RoundTripper
	token string
}

func bearerOf(next http.RoundTripper, token string) http.RoundTripper {
	return &bearer{next: next, token: token}
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

type toolCase struct {
	tool string
	args map[string]any
	want string
}

func callAll(t *testing.T, ctx context.Context, cs *mcp.ClientSession, cases []toolCase) {
	t.Helper()
	for _, c := range cases {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		if text := toolText(res); res.IsError || !strings.Contains(text, c.want) {
			t.Fatalf("%s: want %q in the result, got %s", c.tool, c.want, text)
		}
	}
}

// mintAlice is a bearer token of the proxy's --auth-hs256-secret.
func mintAlice(t *testing.T, secret string) string {
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// pauseOnce makes one bridged call that pauses and returns its sealed
// state and its one input key.
func pauseOnce(t *testing.T, url, bearer, tool string, args map[string]any) (string, string) {
	t.Helper()
	res, e := bridgeCall(t, url, bearer, tool, args, "", nil)
	var st string
	json.Unmarshal(res["requestState"], &st)
	var irs map[string]json.RawMessage
	json.Unmarshal(res["inputRequests"], &irs)
	if e != "" || !strings.HasPrefix(st, "v1.") || len(irs) != 1 {
		t.Fatalf("%s: want one sealed pause, got %v %s", tool, res, e)
	}
	for k := range irs {
		return st, k
	}
	return "", ""
}

const bridgeSecret = "bridge-http-e2e-secret-of-32-bytes-or-more"

// TestBridgeHTTPServerEverything: npm's server-everything@2026.8.31 over
// Streamable HTTP, a 2025-11-25 server, behind `mrtr proxy --upstream
// URL`: the proxy tells its era, and a 2026-07-28 go-sdk client completes
// its elicitation and sampling tools through the bridge, each round
// sealed, while its roots tool gets the operator's --roots; a replayed
// token is refused.
func TestBridgeHTTPServerEverything(t *testing.T) {
	up := serverEverythingHTTP(t)
	url := startProxy(t, "--upstream", up, "--auth-hs256-secret", bridgeSecret, "--roots", "file:///srv/operator")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seal := &sealedOnly{t: t}
	cs := bridgedClient(t, ctx, url, bearerOf(seal, mintAlice(t, bridgeSecret)))
	callAll(t, ctx, cs, []toolCase{
		{"trigger-elicitation-request", map[string]any{}, "Ada Lovelace"},
		{"trigger-sampling-request", map[string]any{"prompt": "hello", "maxTokens": 10}, "sampled by the test"},
		// The operator's roots, never the client's (file:///srv/project).
		{"get-roots-list", map[string]any{}, "file:///srv/operator"},
	})
	if seal.tokens < 2 {
		t.Fatalf("%d sealed rounds seen, want one per tool at least", seal.tokens)
	}

	alice := mintAlice(t, bridgeSecret)
	st, k := pauseOnce(t, url, alice, "trigger-elicitation-request", map[string]any{})
	answers := map[string]any{k: map[string]any{"action": "accept", "content": map[string]any{"name": "Ada", "check": true}}}
	if res, e := bridgeCall(t, url, alice, "trigger-elicitation-request", map[string]any{}, st, answers); e != "" || !strings.Contains(string(res["content"]), "Ada") {
		t.Fatalf("resume: %v %s", res, e)
	}
	if _, e := bridgeCall(t, url, alice, "trigger-elicitation-request", map[string]any{}, st, answers); !strings.Contains(e, "replayed") {
		t.Fatalf("replay: want replayed, got %q", e)
	}
}

// TestBridgeLegacyGoServer: go-sdk's everything-server v1.4.1, which
// speaks 2025-11-25 and older only, over HTTP and over stdio: its
// test_elicitation and test_sampling tools complete for a go-sdk v1.8.0
// client through the bridge, and changed arguments on the retry are
// refused.
func TestBridgeLegacyGoServer(t *testing.T) {
	bin := legacyEverything(t)
	for _, over := range []string{"http", "stdio"} {
		t.Run(over, func(t *testing.T) {
			var url string
			if over == "http" {
				addr := freeAddr(t)
				startHTTPUpstream(t, exec.Command(bin, "-http="+addr), addr)
				url = startProxy(t, "--upstream", "http://"+addr+"/mcp", "--auth-hs256-secret", bridgeSecret)
			} else {
				url = startProxy(t, "--auth-hs256-secret", bridgeSecret, "--", bin)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			seal := &sealedOnly{t: t}
			cs := bridgedClient(t, ctx, url, bearerOf(seal, mintAlice(t, bridgeSecret)))
			callAll(t, ctx, cs, []toolCase{
				{"test_elicitation", map[string]any{"message": "Who are you?"}, "action=accept"},
				{"test_sampling", map[string]any{"prompt": "hello"}, "LLM response: sampled by the test"},
			})
			if seal.tokens < 2 {
				t.Fatalf("%d sealed rounds seen, want one per tool at least", seal.tokens)
			}

			alice := mintAlice(t, bridgeSecret)
			st, k := pauseOnce(t, url, alice, "test_elicitation", map[string]any{"message": "a"})
			answers := map[string]any{k: map[string]any{"action": "accept", "content": map[string]any{"username": "ada"}}}
			if _, e := bridgeCall(t, url, alice, "test_elicitation", map[string]any{"message": "b"}, st, answers); !strings.HasPrefix(e, "-32602") || !strings.Contains(e, "arguments_changed") {
				t.Fatalf("changed arguments: want -32602 arguments_changed, got %q", e)
			}
			res, e := bridgeCall(t, url, alice, "test_elicitation", map[string]any{"message": "a"}, st, answers)
			if e != "" || !strings.Contains(string(res["content"]), "username:ada") {
				t.Fatalf("the genuine resume afterwards: %v %s", res, e)
			}
		})
	}
}
