package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	m3client "github.com/mark3labs/mcp-go/client"
	m3transport "github.com/mark3labs/mcp-go/client/transport"
	m3 "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The interop tests drive `mrtr serve` with MCP clients nobody in this
// module wrote. Each client runs its own Multi Round-Trip loop (or, on the
// 2025-11-25 wire, answers the server's elicitation/create requests); the
// test only supplies the "user": an elicitation handler that approves
// deployments and plays guess_number by binary search on the server's
// higher/lower hints.

const (
	wire2026 = "2026-07-28"
	wire2025 = "2025-11-25"
	guessMax = 8
	// maxGames bounds how many guess_number games a test plays to see one
	// that needs more than one guess (a first guess is right 1 time in 8).
	maxGames = 6
)

// user answers elicitations the way a person at the client would.
type user struct {
	mu        sync.Mutex
	approvals int      // deploy confirmations answered
	lo, hi    int      // guess_number: the secret is in [lo, hi]
	last      int      // the last guess made in this game, 0 before the first
	guesses   int      // guesses made in this game
	hints     []string // the messages that came with each guess request
}

// newGame starts a guess_number game over [1, max].
func (u *user) newGame(max int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.lo, u.hi, u.last, u.guesses, u.hints = 1, max, 0, 0, nil
}

func (u *user) state() (approvals, last, guesses int, hints []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.approvals, u.last, u.guesses, append([]string(nil), u.hints...)
}

// answer returns the content of an accepted elicitation, choosing by the
// requested schema: {approve: boolean} for deploy's confirm, {guess:
// integer} for guess_number.
func (u *user) answer(message string, schema any) (map[string]any, error) {
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("requestedSchema %s: %v", raw, err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := s.Properties["approve"]; ok {
		u.approvals++
		return map[string]any{"approve": true}, nil
	}
	if _, ok := s.Properties["guess"]; ok {
		if u.last != 0 {
			m := strings.ToLower(message)
			higher, lower := strings.Contains(m, "higher"), strings.Contains(m, "lower")
			switch {
			case higher && !lower:
				u.lo = u.last + 1
			case lower && !higher:
				u.hi = u.last - 1
			default:
				return nil, fmt.Errorf("guess %d: no unambiguous higher/lower hint in %q", u.last, message)
			}
		}
		if u.lo > u.hi {
			return nil, fmt.Errorf("inconsistent hints: secret would be in [%d, %d] (messages %q)", u.lo, u.hi, append(u.hints, message))
		}
		u.last = (u.lo + u.hi) / 2
		u.guesses++
		u.hints = append(u.hints, message)
		return map[string]any{"guess": u.last}, nil
	}
	return nil, fmt.Errorf("unexpected elicitation %q with schema %s", message, raw)
}

// callFunc calls a tool through some client and returns its text content.
type callFunc func(ctx context.Context, tool string, args map[string]any) (text string, isError bool, err error)

// runFlows runs the two demo flows through call: a two-round deploy and
// guess_number games until one took at least two guesses.
func runFlows(t *testing.T, u *user, call callFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	before, _, _, _ := u.state()
	text, isErr, err := call(ctx, "deploy", map[string]any{"service": "billing", "env": "staging"})
	after, _, _, _ := u.state()
	switch {
	case err != nil:
		t.Errorf("deploy: %v", err)
	case isErr:
		t.Errorf("deploy: isError result %q", text)
	case text != "deployed billing to staging":
		t.Errorf("deploy: text %q, want %q", text, "deployed billing to staging")
	case after-before != 1:
		t.Errorf("deploy: the user was asked to confirm %d times, want 1", after-before)
	}

	for game := 1; game <= maxGames; game++ {
		u.newGame(guessMax)
		text, isErr, err := call(ctx, "guess_number", map[string]any{"max": guessMax})
		_, last, guesses, hints := u.state()
		if err != nil {
			t.Fatalf("guess_number game %d: %v (guesses %d, messages %q)", game, err, guesses, hints)
		}
		if isErr {
			t.Fatalf("guess_number game %d: isError result %q (messages %q)", game, text, hints)
		}
		if want := fmt.Sprintf("correct: %d", last); text != want {
			t.Fatalf("guess_number game %d: text %q, want %q (messages %q)", game, text, want, hints)
		}
		// Binary search over [1, 8] needs at most 4 guesses if the hints are right.
		if guesses < 1 || guesses > 4 {
			t.Fatalf("guess_number game %d: %d guesses for max %d (messages %q)", game, guesses, guessMax, hints)
		}
		if guesses >= 2 {
			t.Logf("guess_number: %s after %d guesses (game %d)", text, guesses, game)
			return
		}
	}
	t.Fatalf("guess_number: %d games all ended on the first guess; the multi-round path was never exercised", maxGames)
}

// wireLog is an http.RoundTripper that records what a Go client posts, to
// show which wire it really spoke. Each has its own connection pool, closed
// when the test ends: a spare keep-alive connection that never carried a
// request would otherwise hold up the server's graceful shutdown for 5 s.
type wireLog struct {
	base       *http.Transport
	mu         sync.Mutex
	methods    map[string]int // JSON-RPC requests by method
	versions   map[string]int // MCP-Protocol-Version headers of POSTs
	withState  int            // tools/call requests carrying a requestState
	responses  int            // JSON-RPC responses posted (answers to server requests)
	sessionIDs int            // POSTs carrying Mcp-Session-Id
}

func newWireLog(t *testing.T) *wireLog {
	base := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections)
	return &wireLog{base: base, methods: map[string]int{}, versions: map[string]int{}}
}

func (w *wireLog) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		r.ContentLength = int64(len(body))
		var msg struct {
			Method string `json:"method"`
			Params struct {
				RequestState *string `json:"requestState"`
			} `json:"params"`
			Result json.RawMessage `json:"result"`
		}
		_ = json.Unmarshal(body, &msg)
		w.mu.Lock()
		w.versions[r.Header.Get("Mcp-Protocol-Version")]++
		if r.Header.Get("Mcp-Session-Id") != "" {
			w.sessionIDs++
		}
		switch {
		case msg.Method != "":
			w.methods[msg.Method]++
			if msg.Method == "tools/call" && msg.Params.RequestState != nil {
				w.withState++
			}
		case msg.Result != nil:
			w.responses++
		}
		w.mu.Unlock()
	}
	return w.base.RoundTrip(r)
}

// check asserts that the client spoke the given wire: on 2026-07-28 no
// handshake and retries carrying requestState; on 2025-11-25 the initialize
// handshake, a session, answers posted to server-initiated elicitations and
// no requestState at all.
func (w *wireLog) check(t *testing.T, wire string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("wire: methods %v, protocol versions %v, tools/call with requestState %d, responses posted %d, with session id %d",
		w.methods, w.versions, w.withState, w.responses, w.sessionIDs)
	switch wire {
	case wire2026:
		if w.methods["initialize"] != 0 {
			t.Errorf("2026-07-28 client sent initialize")
		}
		if w.methods["server/discover"] == 0 {
			t.Errorf("2026-07-28 client never sent server/discover")
		}
		// deploy resumes once, guess_number at least once.
		if w.withState < 2 {
			t.Errorf("%d tools/call retries carried a requestState, want >= 2: the client's MRTR loop did not run", w.withState)
		}
		for v := range w.versions {
			if v != wire2026 {
				t.Errorf("a POST carried MCP-Protocol-Version %q, want only %s", v, wire2026)
			}
		}
	case wire2025:
		if w.methods["initialize"] != 1 {
			t.Errorf("2025-11-25 client sent initialize %d times, want 1", w.methods["initialize"])
		}
		if w.withState != 0 {
			t.Errorf("%d tools/call requests carried a requestState on the 2025-11-25 wire", w.withState)
		}
		if w.responses < 2 {
			t.Errorf("%d JSON-RPC responses posted, want >= 2 (answers to the server's elicitation/create)", w.responses)
		}
		if w.sessionIDs == 0 {
			t.Errorf("no POST carried an Mcp-Session-Id on the 2025-11-25 wire")
		}
	}
}

// TestInteropGoSDK drives mrtr serve with the official Go SDK's client on
// both wires. On 2026-07-28 its MRTR middleware fulfils input_required
// results through the ElicitationHandler and retries with the echoed
// requestState; on 2025-11-25 the same handler answers the server's
// elicitation/create requests within the session.
func TestInteropGoSDK(t *testing.T) {
	t.Parallel()
	url := startServe(t)
	for _, wire := range []string{wire2026, wire2025} {
		t.Run(wire, func(t *testing.T) {
			u := &user{}
			wl := newWireLog(t)
			client := mcp.NewClient(&mcp.Implementation{Name: "mrtr-e2e-gosdk", Version: "1.0.0"}, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					content, err := u.answer(r.Params.Message, r.Params.RequestedSchema)
					if err != nil {
						return nil, err
					}
					return &mcp.ElicitResult{Action: "accept", Content: content}, nil
				},
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: wl}},
				&mcp.ClientSessionOptions{ProtocolVersion: wire})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != wire {
				t.Fatalf("negotiated protocol version %q, want %q", got, wire)
			}
			runFlows(t, u, func(ctx context.Context, tool string, args map[string]any) (string, bool, error) {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
				if err != nil {
					return "", false, err
				}
				return goSDKText(res), res.IsError, nil
			})
			wl.check(t, wire)
		})
	}
}

func goSDKText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// m3Elicitor adapts user to mcp-go's ElicitationHandler.
type m3Elicitor struct{ u *user }

func (e m3Elicitor) Elicit(_ context.Context, r m3.ElicitationRequest) (*m3.ElicitationResult, error) {
	content, err := e.u.answer(r.Params.Message, r.Params.RequestedSchema)
	if err != nil {
		return nil, err
	}
	return &m3.ElicitationResult{ElicitationResponse: m3.ElicitationResponse{
		Action: m3.ElicitationResponseActionAccept, Content: content,
	}}, nil
}

// TestInteropMCPGo drives mrtr serve with mark3labs/mcp-go's client
// (v1.2.1). That client speaks 2026-07-28 itself: Initialize probes with
// server/discover, every request carries the _meta envelope and the
// Mcp-Method/Mcp-Name headers, and CallTool runs an automatic SEP-2322 loop
// (client/mrtr.go: input requests go to the registered ElicitationHandler,
// the call is retried with inputResponses and the echoed requestState, at
// most 10 rounds). So no manual loop is needed; it is used on the 2026-07-28
// wire as is, and pinned to 2025-11-25 (WithProtocolVersion) it does the
// initialize handshake and answers server-initiated elicitation/create
// requests on the POST's event stream instead.
func TestInteropMCPGo(t *testing.T) {
	t.Parallel()
	url := startServe(t)
	for _, wire := range []string{wire2026, wire2025} {
		t.Run(wire, func(t *testing.T) {
			u := &user{}
			wl := newWireLog(t)
			tr, err := m3transport.NewStreamableHTTP(url, m3transport.WithHTTPBasicClient(&http.Client{Transport: wl}))
			if err != nil {
				t.Fatal(err)
			}
			c := m3client.NewClient(tr, m3client.WithElicitationHandler(m3Elicitor{u}), m3client.WithProtocolVersion(wire))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := c.Start(ctx); err != nil {
				t.Fatalf("start: %v", err)
			}
			defer c.Close()
			initReq := m3.InitializeRequest{}
			initReq.Params.ClientInfo = m3.Implementation{Name: "mrtr-e2e-mcp-go", Version: "1.0.0"}
			initReq.Params.ProtocolVersion = wire
			if _, err := c.Initialize(ctx, initReq); err != nil {
				t.Fatalf("initialize: %v", err)
			}
			if got := c.ProtocolVersion(); got != wire {
				t.Fatalf("negotiated protocol version %q, want %q", got, wire)
			}
			runFlows(t, u, func(ctx context.Context, tool string, args map[string]any) (string, bool, error) {
				req := m3.CallToolRequest{}
				req.Params.Name = tool
				req.Params.Arguments = args
				res, err := c.CallTool(ctx, req)
				if err != nil {
					return "", false, err
				}
				var parts []string
				for _, content := range res.Content {
					if tc, ok := m3.AsTextContent(content); ok {
						parts = append(parts, tc.Text)
					}
				}
				return strings.Join(parts, "\n"), res.IsError, nil
			})
			wl.check(t, wire)
		})
	}
}

// tsResult is what conformance/interop.mjs prints.
type tsResult struct {
	ProtocolVersion string `json:"protocolVersion"`
	Era             string `json:"era"`
	Deploy          struct {
		Text      string `json:"text"`
		IsError   bool   `json:"isError"`
		Approvals int    `json:"approvals"`
	} `json:"deploy"`
	Guess struct {
		Text    string   `json:"text"`
		IsError bool     `json:"isError"`
		Secret  int      `json:"secret"`
		Guesses int      `json:"guesses"`
		Games   int      `json:"games"`
		Hints   []string `json:"hints"`
	} `json:"guess"`
	Wire struct {
		Methods   map[string]int `json:"methods"`
		Versions  map[string]int `json:"versions"`
		WithState int            `json:"withState"`
	} `json:"wire"`
	Error string `json:"error"`
}

// TestInteropTypeScript drives mrtr serve with the TypeScript SDK client
// (@modelcontextprotocol/client, pinned in conformance/package.json) through
// conformance/interop.mjs, on the pinned Node 22. The client is pinned to
// 2026-07-28 and runs its own automatic input_required loop.
func TestInteropTypeScript(t *testing.T) {
	needHarness(t)
	t.Parallel()
	url := startServe(t)
	dir := filepath.Join(repoRoot, "conformance")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "node"), "interop.mjs", url)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var res tsResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("interop.mjs: %v; no JSON result (%v). stdout:\n%s\nstderr:\n%s", runErr, err, tail(stdout.String(), 40), tail(stderr.String(), 40))
	}
	if runErr != nil || res.Error != "" {
		t.Fatalf("interop.mjs: %v: %s\nstderr:\n%s", runErr, res.Error, tail(stderr.String(), 40))
	}
	t.Logf("interop.mjs: %s", lines[len(lines)-1])

	if res.ProtocolVersion != wire2026 || res.Era != "modern" {
		t.Errorf("TS client negotiated %q (era %q), want %s (modern)", res.ProtocolVersion, res.Era, wire2026)
	}
	if res.Deploy.IsError || res.Deploy.Text != "deployed billing to production" || res.Deploy.Approvals != 1 {
		t.Errorf("deploy: text %q, isError %v, approvals %d; want %q, false, 1",
			res.Deploy.Text, res.Deploy.IsError, res.Deploy.Approvals, "deployed billing to production")
	}
	g := res.Guess
	if g.IsError || g.Text != fmt.Sprintf("correct: %d", g.Secret) || g.Guesses < 2 || g.Guesses > 4 {
		t.Errorf("guess_number: text %q, isError %v, last guess %d after %d guesses in game %d (messages %q); want \"correct: <last guess>\" after 2-4 guesses",
			g.Text, g.IsError, g.Secret, g.Guesses, g.Games, g.Hints)
	}
	if res.Wire.Methods["initialize"] != 0 || res.Wire.Methods["server/discover"] == 0 || res.Wire.WithState < 2 {
		t.Errorf("TS client wire: methods %v, tools/call with requestState %d; want discover, no initialize, >= 2 resumes",
			res.Wire.Methods, res.Wire.WithState)
	}
	for v := range res.Wire.Versions {
		if v != wire2026 {
			t.Errorf("TS client sent MCP-Protocol-Version %q, want only %s", v, wire2026)
		}
	}
}
