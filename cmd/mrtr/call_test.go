package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/call"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/reqstate"
)

const testBearer = "sekrit-token-value"

// startCallServer runs an MCP server with mrtr-sealed fixture tools over
// loopback HTTP, serving both protocol generations at /mcp and, behind a
// bearer token, at /auth/mcp. It returns the server's base URL.
func startCallServer(t *testing.T) string {
	t.Helper()
	ring, err := reqstate.GenerateKeyRing("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "call-test", Version: "1"}, nil)
	ad := gosdk.Install(s, mrtr.New(reqstate.New(ring, nil), nil), nil)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}

	// approve: two rounds, one yes/no question.
	type service struct {
		Service string `json:"service"`
	}
	approve := func(msg string) mcp.InputRequestMap {
		return mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: msg, RequestedSchema: map[string]any{
			"type": "object", "required": []string{"approve"},
			"properties": map[string]any{"approve": map[string]any{"type": "boolean", "title": "Approve?"}},
		}}}
	}
	gosdk.AddTool(ad, &mcp.Tool{Name: "approve", Description: "asks before deploying"},
		func(ctx context.Context, req *mcp.CallToolRequest, args service, flow *gosdk.ToolFlow[service]) (*mcp.CallToolResult, error) {
			st, resumed := flow.State()
			if !resumed {
				return flow.Ask(args, approve("Deploy "+args.Service+"?"))
			}
			ans, ok := flow.Elicited("confirm")
			switch {
			case !ok:
				return flow.Ask(st, approve("Please answer: deploy "+st.Service+"?"))
			case ans.Action != "accept":
				return text("not deployed: " + ans.Action), nil
			case ans.Content["approve"] == true:
				return text("deployed " + st.Service), nil
			}
			return text("not deployed: not approved"), nil
		})

	// guess: as many rounds as it takes.
	type game struct {
		Secret  int `json:"secret"`
		Guesses int `json:"guesses"`
	}
	guess := func(msg string) mcp.InputRequestMap {
		return mcp.InputRequestMap{"guess": &mcp.ElicitParams{Message: msg, RequestedSchema: map[string]any{
			"type": "object", "required": []string{"guess"},
			"properties": map[string]any{"guess": map[string]any{
				"type": "integer", "title": "Your guess", "minimum": 1, "maximum": 100}},
		}}}
	}
	gosdk.AddTool(ad, &mcp.Tool{Name: "guess", Description: "guess the secret number"},
		func(ctx context.Context, req *mcp.CallToolRequest, args struct {
			Secret int `json:"secret"`
		}, flow *gosdk.ToolFlow[game]) (*mcp.CallToolResult, error) {
			st, resumed := flow.State()
			if !resumed {
				return flow.Ask(game{Secret: args.Secret}, guess("Guess a number between 1 and 100."))
			}
			ans, ok := flow.Elicited("guess")
			if !ok || ans.Action != "accept" {
				return text(fmt.Sprintf("gave up after %d guesses", st.Guesses)), nil
			}
			g, _ := ans.Content["guess"].(float64)
			st.Guesses++
			switch {
			case int(g) > st.Secret:
				return flow.Ask(st, guess(fmt.Sprintf("Lower than %d. Guess again.", int(g))))
			case int(g) < st.Secret:
				return flow.Ask(st, guess(fmt.Sprintf("Higher than %d. Guess again.", int(g))))
			}
			return text(fmt.Sprintf("correct: %d after %d guesses", st.Secret, st.Guesses)), nil
		})

	addVaultResource(ad)

	object := map[string]any{"type": "object"}
	s.AddTool(&mcp.Tool{Name: "kinds", InputSchema: object}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "hello"},
			&mcp.ImageContent{MIMEType: "image/png", Data: make([]byte, 100)},
			&mcp.AudioContent{MIMEType: "audio/wav", Data: make([]byte, 7)},
			&mcp.ResourceLink{URI: "test://link", Name: "link"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://blob", MIMEType: "application/octet-stream", Blob: []byte("abc")}},
		}, StructuredContent: map[string]any{"n": 1, "s": "x"}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "structured", InputSchema: object}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"ok":true}`}}, StructuredContent: map[string]any{"ok": true}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "fail", InputSchema: object}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "backend down"}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "rpcerr", InputSchema: object}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid requestState", Data: json.RawMessage(`{"reason":"expired"}`)}
	})
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
		"name": map[string]any{"type": "string"}, "maybe": map[string]any{"type": []any{"string", "null"}},
		"n": map[string]any{"type": "integer"}, "any": map[string]any{},
	}}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		d := json.NewDecoder(bytes.NewReader(req.Params.Arguments))
		d.UseNumber()
		var v any
		d.Decode(&v)
		b, _ := json.Marshal(v) // sorted keys
		return text(string(b)), nil
	})
	done := make(chan struct{})
	s.AddTool(&mcp.Tool{Name: "slow", InputSchema: object}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-done:
		case <-ctx.Done():
		case <-time.After(time.Minute):
		}
		return text("late"), nil
	})

	h := gosdk.NewHTTPHandler(s, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/auth/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testBearer {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	srv := httptest.NewServer(mux) // 127.0.0.1
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) }) // runs first: lets a slow handler finish
	return srv.URL
}

// runCall runs `mrtr call` with stdin, an environment and args, and
// returns its error and output.
func runCall(t *testing.T, ctx context.Context, stdin io.Reader, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &base.App{Stdin: stdin, Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }}
	err = call.Cmd.Run(ctx, a, args)
	return out.String(), errb.String(), err
}

func TestCallMultiRound(t *testing.T) {
	url := startCallServer(t) + "/mcp"
	for _, wire := range []string{"2026-07-28", "legacy"} {
		var legacy []string
		if wire == "legacy" {
			legacy = []string{"--legacy"}
		}
		t.Run(wire, func(t *testing.T) {
			tests := []struct {
				name, stdin string
				args        []string
				want        []string
			}{
				{"approve", "y\n", []string{"approve", "--arg", "service=api"},
					[]string{"Deploy api?\n(answer :decline to refuse, :cancel or Ctrl-D to dismiss)\n",
						"approve (boolean, required): Approve?\napprove [y/n]: ", "deployed api\n"}},
				{"approve, not approved", "\nno\n", []string{"approve", "--arg", "service=api"},
					[]string{"approve [y/n]: ", "a value is required", "approve [y/n]: ", "not deployed: not approved\n"}},
				{"decline", ":decline\n", []string{"approve", "--arg", "service=api"},
					[]string{"approve [y/n]: ", "not deployed: decline\n"}},
				{"cancel", ":cancel\n", []string{"approve", "--arg", "service=api"},
					[]string{"approve [y/n]: ", "not deployed: cancel\n"}},
				{"end of input cancels", "", []string{"approve", "--arg", "service=api"},
					[]string{"(end of input: cancel)", "not deployed: cancel\n"}},
				{"guess", "50\n0\n25\n\n42\n", []string{"guess", "--args-json", `{"secret":42}`},
					[]string{"Guess a number between 1 and 100.\n", "guess (integer, required, >= 1, <= 100): Your guess\nguess: ",
						"Lower than 50. Guess again.\nguess (integer", "guess: ", "  must be at least 1\nguess: ",
						"Higher than 25. Guess again.\n", "guess: ", "correct: 42 after 3 guesses\n"}},
				{"guess, give up", "50\n:cancel\n", []string{"guess", "--arg", "secret=42"},
					[]string{"Lower than 50", "gave up after 1 guesses\n"}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					args := append(append([]string{url}, tt.args...), legacy...)
					out, errOut, err := runCall(t, t.Context(), strings.NewReader(tt.stdin), nil, args...)
					if err != nil {
						t.Fatalf("call: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
					}
					testcmd.WantInOrder(t, out, tt.want...)
				})
			}
		})
	}
}

func TestCallResults(t *testing.T) {
	base := startCallServer(t)
	url := base + "/mcp"
	t.Run("content kinds", func(t *testing.T) {
		out, _, err := runCall(t, t.Context(), strings.NewReader(""), nil, url, "kinds")
		want := "hello\n[image image/png, 100 bytes]\n[audio audio/wav, 7 bytes]\n[resource link test://link (link)]\n" +
			"[resource test://blob, application/octet-stream, 3 bytes]\n{\n  \"n\": 1,\n  \"s\": \"x\"\n}\n"
		if err != nil || out != want {
			t.Fatalf("%v\n%q\nwant\n%q", err, out, want)
		}
	})
	t.Run("structured content shown once", func(t *testing.T) {
		out, _, err := runCall(t, t.Context(), strings.NewReader(""), nil, url, "structured")
		if err != nil || out != "{\n  \"ok\": true\n}\n" {
			t.Fatalf("%v %q", err, out)
		}
	})
	t.Run("tool error", func(t *testing.T) {
		out, errOut, err := runCall(t, t.Context(), strings.NewReader(""), nil, url, "fail")
		if err == nil || err.Error() != "tool fail reported an error" || out != "" || errOut != "backend down\n" {
			t.Fatalf("%v stdout %q stderr %q", err, out, errOut)
		}
	})
	t.Run("JSON-RPC error", func(t *testing.T) {
		_, _, err := runCall(t, t.Context(), strings.NewReader(""), nil, url, "rpcerr")
		if err == nil || err.Error() != "error -32602: invalid requestState\n  data: {\"reason\":\"expired\"}" {
			t.Fatalf("%v", err)
		}
	})
	t.Run("unknown tool", func(t *testing.T) {
		_, _, err := runCall(t, t.Context(), strings.NewReader(""), nil, url, "nope")
		if err == nil || !strings.HasPrefix(err.Error(), "error -32602: ") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("arguments", func(t *testing.T) {
		out, _, err := runCall(t, t.Context(), strings.NewReader(""), nil, url, "echo",
			"--args-json", `{"name":"x","n":1,"obj":{"a":[1,2]}}`, "--arg", "name=123", "--arg", "n=7",
			"--arg", "maybe=true", "--arg", "any=12", "--arg", "big=12345678901234567890", "--arg", "s=hello world")
		want := `{"any":12,"big":12345678901234567890,"maybe":"true","n":7,"name":"123","obj":{"a":[1,2]},"s":"hello world"}` + "\n"
		if err != nil || out != want {
			t.Fatalf("%v\n%s\nwant\n%s", err, out, want)
		}
	})
	t.Run("bearer token", func(t *testing.T) {
		auth := base + "/auth/mcp"
		out, _, err := runCall(t, t.Context(), strings.NewReader(""), map[string]string{"MRTR_BEARER": testBearer}, auth, "kinds")
		if err != nil || !strings.HasPrefix(out, "hello\n") {
			t.Fatalf("$MRTR_BEARER: %v %q", err, out)
		}
		out, _, err = runCall(t, t.Context(), strings.NewReader(""), map[string]string{"MRTR_BEARER": "wrong"}, auth, "kinds", "--bearer", testBearer)
		if err != nil || !strings.HasPrefix(out, "hello\n") {
			t.Fatalf("--bearer: %v %q", err, out)
		}
		_, errOut, err := runCall(t, t.Context(), strings.NewReader(""), map[string]string{"MRTR_BEARER": "wrong-token"}, auth, "kinds")
		if err == nil || !strings.Contains(err.Error(), "Unauthorized") || strings.Contains(err.Error()+errOut, "wrong-token") {
			t.Fatalf("wrong token: %v %q", err, errOut)
		}
	})
	t.Run("no server", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		_, _, err := runCall(t, t.Context(), strings.NewReader(""), nil, srv.URL+"/mcp", "kinds")
		if err == nil || !strings.HasPrefix(err.Error(), "cannot connect to "+srv.URL+"/mcp: connection refused") {
			t.Fatalf("%v", err)
		}
	})
}

// screen is a command's output that a test can wait on, so it acts when
// a prompt shows instead of after a guessed delay. It is safe for
// concurrent use.
type screen struct {
	mu      sync.Mutex
	shown   []byte
	read    int // how far expect has read
	changed chan struct{}
	closed  chan struct{} // closed by end: nothing more will be shown
}

func newScreen() *screen {
	return &screen{changed: make(chan struct{}, 1), closed: make(chan struct{})}
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.shown = append(s.shown, p...)
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

// end marks that nothing more will be written.
func (s *screen) end() { close(s.closed) }

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.shown)
}

// expect waits until the screen shows want after what was already read.
// The 20 s limit only turns a hang into a readable failure.
func (s *screen) expect(t testing.TB, want string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		s.mu.Lock()
		i := bytes.Index(s.shown[s.read:], []byte(want))
		if i >= 0 {
			s.read += i + len(want)
		}
		s.mu.Unlock()
		if i >= 0 {
			return
		}
		select {
		case <-s.changed:
		case <-s.closed:
			s.mu.Lock()
			done := bytes.Contains(s.shown[s.read:], []byte(want))
			s.mu.Unlock()
			if !done {
				t.Fatalf("the command ended without showing %q; it showed:\n%s", want, s)
			}
		case <-timeout:
			t.Fatalf("waited for %q; the command shows:\n%s", want, s)
		}
	}
}

// handTimer is a --timeout timer that never fires by itself: fire runs
// it as if its time had come, unless it is stopped (paused at a prompt).
type handTimer struct {
	mu     sync.Mutex
	f      func()
	active bool
	resets int
}

func (h *handTimer) Stop() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	was := h.active
	h.active = false
	return was
}

func (h *handTimer) Reset(time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	was := h.active
	h.active = true
	h.resets++
	return was
}

// fire runs the timer's function if the timer is running and reports
// whether it did.
func (h *handTimer) fire() bool {
	h.mu.Lock()
	if !h.active {
		h.mu.Unlock()
		return false
	}
	h.active = false
	h.mu.Unlock()
	h.f()
	return true
}

func (h *handTimer) resetCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.resets
}

// handTimers returns an App.AfterFunc that sends each timer it makes on
// the returned channel.
func handTimers() (base.AfterFunc, <-chan *handTimer) {
	made := make(chan *handTimer, 1)
	return func(_ time.Duration, f func()) base.StopTimer {
		h := &handTimer{f: f, active: true}
		made <- h
		return h
	}, made
}

// startCall runs `mrtr call` args in the background with stdin, the
// screen as stdout and an optional AfterFunc; the error arrives on the
// returned channel.
func startCall(ctx context.Context, stdin io.Reader, out *screen, after base.AfterFunc, args ...string) <-chan error {
	done := make(chan error, 1)
	a := &base.App{Stdin: stdin, Stdout: out, Stderr: io.Discard, Getenv: func(string) string { return "" }, AfterFunc: after}
	go func() {
		done <- call.Cmd.Run(ctx, a, args)
		out.end()
	}()
	return done
}

func TestCallTimeout(t *testing.T) {
	url := startCallServer(t) + "/mcp"
	// Whenever the real 200 ms timer fires (during the connect or the
	// call), the slow tool has not answered: the outcome does not depend
	// on how fast this machine is.
	t.Run("server too slow", func(t *testing.T) {
		_, _, err := runCall(t, t.Context(), strings.NewReader(""), nil, url, "slow", "--timeout", "200ms")
		if err == nil || err.Error() != "no answer from the server within 200ms" {
			t.Fatalf("%v", err)
		}
	})
	// The hand-fired timer below really ends a call when it runs: the
	// slow tool never answers, so the timer is running when fired.
	t.Run("hand-fired timer", func(t *testing.T) {
		after, timers := handTimers()
		done := startCall(t.Context(), strings.NewReader(""), newScreen(), after, url, "slow", "--timeout", "1m")
		if !(<-timers).fire() {
			t.Fatal("the --timeout timer was stopped with no prompt showing")
		}
		if err := <-done; err == nil || err.Error() != "no answer from the server within 1m0s" {
			t.Fatalf("%v, want the timeout", err)
		}
	})
	for _, legacy := range []string{"--legacy=false", "--legacy"} {
		// The timer is fired by hand while each prompt shows: the call
		// must not end, however long a person takes.
		t.Run("time at a prompt does not count "+legacy, func(t *testing.T) {
			after, timers := handTimers()
			out := newScreen()
			r, w := io.Pipe()
			defer w.Close()
			done := startCall(t.Context(), r, out, after, url, "approve", "--arg", "service=api", "--timeout", "1m", legacy)
			timer := <-timers
			out.expect(t, "approve [y/n]: ")
			if timer.fire() {
				t.Fatal("the --timeout timer was running at the prompt")
			}
			io.WriteString(w, "maybe\n")
			out.expect(t, "approve [y/n]: ")
			if timer.fire() {
				t.Fatal("the --timeout timer was running at the prompt asked again")
			}
			io.WriteString(w, "y\n")
			if err := <-done; err != nil || !strings.HasSuffix(out.String(), "deployed api\n") {
				t.Fatalf("%v\n%s", err, out)
			}
			if n := timer.resetCount(); n != 1 {
				t.Fatalf("the timer restarted %d times after one elicitation, want 1", n)
			}
		})
		t.Run("interrupted at a prompt "+legacy, func(t *testing.T) {
			r, w := io.Pipe() // nobody answers
			defer w.Close()
			out := newScreen()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := startCall(ctx, r, out, nil, url, "approve", "--arg", "service=api", legacy)
			out.expect(t, "approve [y/n]: ")
			cancel()
			if err := <-done; err == nil || err.Error() != "interrupted" {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

func TestCallUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want error
		msg  string
	}{
		{[]string{"--help"}, flag.ErrHelp, "Usage: mrtr call URL [TOOL | --prompt NAME | --resource URI]"},
		{[]string{"--help"}, flag.ErrHelp, "Type :decline to refuse the form, :cancel to dismiss it; Ctrl-D (end\n    of input) cancels it too. Ctrl-C leaves the call"},
		{[]string{"--help"}, flag.ErrHelp, "\n  --max-rounds int"},
		{nil, base.ErrUsage, "Usage: mrtr call URL"},
		{[]string{"http://127.0.0.1:1/mcp", "t", "extra"}, base.ErrUsage, "Usage:"},
		{[]string{"http://127.0.0.1:1/mcp", "t", "--prompt", "p"}, base.ErrUsage, "Usage:"},
		{[]string{"http://127.0.0.1:1/mcp", "--prompt", "p", "--resource", "r"}, base.ErrUsage, "Usage:"},
		{[]string{"http://127.0.0.1:1/mcp", "--max-rounds", "0"}, base.ErrUsage, "--max-rounds must be at least 1"},
		{[]string{"http://127.0.0.1:1/mcp", "--root", "/home/me"}, base.ErrUsage, "want a file:// URI"},
		{[]string{"ftp://x/mcp", "t"}, base.ErrUsage, "URL must be an http:// or https:// URL"},
		{[]string{"http://127.0.0.1:1/mcp", "t", "--arg", "novalue"}, base.ErrUsage, "want k=v"},
		{[]string{"http://127.0.0.1:1/mcp", "t", "--args-json", "[1]"}, base.ErrUsage, "--args-json: want a JSON object"},
		{[]string{"http://127.0.0.1:1/mcp", "t", "--args-json", "{} {}"}, base.ErrUsage, "--args-json: want a JSON object"},
		{[]string{"http://127.0.0.1:1/mcp", "t", "--timeout", "-1s"}, base.ErrUsage, "--timeout must not be negative"},
	} {
		out, errOut, err := runCall(t, t.Context(), strings.NewReader(""), nil, tt.args...)
		if errors.Is(tt.want, flag.ErrHelp) { // help asked for: on stdout
			out, errOut = errOut, out
		}
		if !errors.Is(err, tt.want) || !strings.Contains(errOut, tt.msg) || out != "" {
			t.Errorf("%q: %v, stderr %q, stdout %q; want %v and %q", tt.args, err, errOut, out, tt.want, tt.msg)
		}
	}
	_, errOut, err := runCall(t, t.Context(), strings.NewReader(""), nil, "http://example.com/mcp", "t", "--bearer", "a\nb")
	if err == nil || errors.Is(err, base.ErrUsage) || strings.Contains(err.Error()+errOut, "a\nb") {
		t.Errorf("bad token: %v %q", err, errOut)
	}
}

// helperEnv makes this test binary the mrtr command: TestCallInTerminal
// runs it so under a pseudo-terminal.
const helperEnv = "MRTR_TEST_HELPER"

// requirePTYEnv=1 (make test sets it) makes a pseudo-terminal that
// cannot be opened fail the terminal tests instead of skipping them.
const requirePTYEnv = "MRTR_REQUIRE_PTY"

func TestMain(m *testing.M) {
	testcmd.Init() // this binary supervises the upstreams it runs, or is one
	if os.Getenv(helperEnv) == "1" {
		os.Args = append([]string{"mrtr"}, os.Args[1:]...)
		main() // exits
	}
	os.Exit(m.Run())
}

// terminal is the person's side of a pseudo-terminal running mrtr.
type terminal struct {
	t      testing.TB
	pty    *os.File
	screen *screen // everything shown, without carriage returns
}

// noPTY skips t because no pseudo-terminal can be opened, or fails it
// when requirePTYEnv=1.
func noPTY(t testing.TB, err error) {
	t.Helper()
	if os.Getenv(requirePTYEnv) == "1" {
		t.Fatalf("%s=1 but no pseudo-terminal can be opened: %v", requirePTYEnv, err)
	}
	t.Skipf("no pseudo-terminal (%v); set %s=1 to make this a failure", err, requirePTYEnv)
}

// startTerminal runs the command bin (os.Args[0]: this test binary as
// mrtr) with args under a new pseudo-terminal. Only a pseudo-terminal
// that cannot be opened may skip (see noPTY); a command that does not
// start fails t.
func startTerminal(t testing.TB, bin string, args ...string) (*terminal, *exec.Cmd) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		noPTY(t, err)
		return nil, nil
	}
	ptmx.Close()
	tty.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), helperEnv+"=1", "MRTR_BEARER=")
	f, err := pty.Start(cmd)
	if err != nil {
		t.Fatalf("start %s under a pseudo-terminal: %v", bin, err)
	}
	tm := &terminal{t: t, pty: f, screen: newScreen()}
	go func() {
		defer tm.screen.end()
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			tm.screen.Write(bytes.ReplaceAll(buf[:n], []byte("\r"), nil))
			if err != nil { // EIO once the command has exited
				return
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		f.Close()
	})
	return tm, cmd
}

// expect waits until the terminal shows s after what was already read.
func (tm *terminal) expect(s string) {
	tm.t.Helper()
	tm.screen.expect(tm.t, s)
}

// answer types a line and presses Enter.
func (tm *terminal) answer(s string) {
	tm.t.Helper()
	if _, err := tm.pty.Write([]byte(s + "\r")); err != nil {
		tm.t.Fatal(err)
	}
}

// TestTerminalSkipsOnlyWithoutPTY pins when the terminal tests may skip:
// a command that cannot start fails, and a missing pseudo-terminal fails
// too once requirePTYEnv=1.
func TestTerminalSkipsOnlyWithoutPTY(t *testing.T) {
	t.Run("broken command", func(t *testing.T) {
		ptmx, tty, err := pty.Open()
		if err != nil {
			noPTY(t, err)
		}
		ptmx.Close()
		tty.Close()
		t.Setenv(requirePTYEnv, "")
		rec := runTB(t, func(tb testing.TB) {
			startTerminal(tb, filepath.Join(t.TempDir(), "no-such-mrtr"), "call")
		})
		if rec.skipped || !rec.failed || !strings.Contains(rec.msg, "no-such-mrtr") {
			t.Fatalf("skipped=%v failed=%v msg=%q; want a failure naming the command", rec.skipped, rec.failed, rec.msg)
		}
	})
	errNoPTY := errors.New("open /dev/ptmx: no such device")
	t.Run("no pseudo-terminal", func(t *testing.T) {
		t.Setenv(requirePTYEnv, "")
		rec := runTB(t, func(tb testing.TB) { noPTY(tb, errNoPTY) })
		if !rec.skipped || rec.failed || !strings.Contains(rec.msg, requirePTYEnv+"=1") {
			t.Fatalf("skipped=%v failed=%v msg=%q; want a skip naming %s", rec.skipped, rec.failed, rec.msg, requirePTYEnv)
		}
	})
	t.Run("no pseudo-terminal, required", func(t *testing.T) {
		t.Setenv(requirePTYEnv, "1")
		rec := runTB(t, func(tb testing.TB) { noPTY(tb, errNoPTY) })
		if rec.skipped || !rec.failed || !strings.Contains(rec.msg, requirePTYEnv+"=1") {
			t.Fatalf("skipped=%v failed=%v msg=%q; want a failure naming %s", rec.skipped, rec.failed, rec.msg, requirePTYEnv)
		}
	})
}

// recorder is a testing.TB that records how a helper ended the test.
type recorder struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// runTB runs f with a recorder on its own goroutine, as the testing
// package runs a test, and returns the recorder once f has ended.
func runTB(t *testing.T, f func(testing.TB)) *recorder {
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(rec)
	}()
	<-done
	return rec
}

// TestCallInTerminal plays the guessing game as a person would, through a
// real pseudo-terminal: line discipline, echo, Enter, Ctrl-D and Ctrl-C.
func TestCallInTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the command in a pseudo-terminal")
	}
	url := startCallServer(t) + "/mcp"
	wait := func(t *testing.T, cmd *exec.Cmd, tm *terminal) int {
		t.Helper()
		err := cmd.Wait()
		<-tm.screen.closed
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode()
	}

	t.Run("guess", func(t *testing.T) {
		tm, cmd := startTerminal(t, os.Args[0], "call", url, "guess", "--arg", "secret=42")
		tm.expect("Guess a number between 1 and 100.\n(answer :decline to refuse, :cancel or Ctrl-D to dismiss)\n")
		tm.expect("guess (integer, required, >= 1, <= 100): Your guess\nguess: ")
		tm.answer("fifty")
		tm.expect("fifty\n") // echoed by the terminal
		tm.expect(`"fifty" is not an integer` + "\nguess: ")
		tm.answer("50")
		tm.expect("Lower than 50. Guess again.\nguess (integer, required, >= 1, <= 100): Your guess\nguess: ")
		tm.answer("150")
		tm.expect("must be at most 100\nguess: ")
		tm.answer("25")
		tm.expect("Higher than 25. Guess again.\nguess (integer")
		tm.expect("guess: ")
		tm.answer("42")
		tm.expect("\ncorrect: 42 after 3 guesses\n")
		if code := wait(t, cmd, tm); code != 0 {
			t.Fatalf("exit code %d", code)
		}
	})

	t.Run("Ctrl-D cancels", func(t *testing.T) {
		tm, cmd := startTerminal(t, os.Args[0], "call", url, "guess", "--arg", "secret=42")
		tm.expect("guess: ")
		tm.answer("10")
		tm.expect("Higher than 10")
		tm.expect("guess: ")
		tm.pty.Write([]byte{4}) // VEOF at the start of a line: end of input
		tm.expect("(end of input: cancel)\n")
		tm.expect("gave up after 1 guesses\n")
		if code := wait(t, cmd, tm); code != 0 {
			t.Fatalf("exit code %d", code)
		}
	})

	t.Run(":decline", func(t *testing.T) {
		tm, cmd := startTerminal(t, os.Args[0], "call", url, "approve", "--arg", "service=api")
		tm.expect("approve [y/n]: ")
		tm.answer(":decline")
		tm.expect("not deployed: decline\n")
		if code := wait(t, cmd, tm); code != 0 {
			t.Fatalf("exit code %d", code)
		}
	})

	t.Run("Ctrl-C interrupts", func(t *testing.T) {
		tm, cmd := startTerminal(t, os.Args[0], "call", url, "guess", "--arg", "secret=42")
		tm.expect("guess: ")
		tm.pty.Write([]byte{3}) // VINTR: SIGINT to the foreground process group
		tm.expect("mrtr call: interrupted\n")
		if code := wait(t, cmd, tm); code != 130 {
			t.Fatalf("exit code %d", code)
		}
	})
}
