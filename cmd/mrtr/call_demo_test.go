package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/bearer"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/call"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/internal/app/demo"
	"github.com/mrtr-go/mrtr/reqstate"
)

// demoSecret is an HS256 secret for the demo server behind a bearer check.
const demoSecret = "call-demo-test-secret-of-32-bytes!!"

// startDemoServer runs `mrtr serve`'s server (internal/app/demo) in process:
// its guard allows maxRounds pauses per flow (0: the default), and
// guess_number's secret is always max (rand pinned to the last value of
// [1, 1000]: the bytes 0x03 0xE7 read as 999). It serves /mcp, and /auth/mcp
// behind an HS256 bearer check, plus a resource that asks before reading.
func startDemoServer(t *testing.T, maxRounds int) string {
	t.Helper()
	ring, err := reqstate.GenerateKeyRing("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	guard := mrtr.New(reqstate.New(ring, nil), &mrtr.Options{MaxRounds: maxRounds})
	s := demo.NewServer(guard, &demo.Options{Rand: bytes.NewReader(bytes.Repeat([]byte{0x03, 0xe7}, 64))})
	h := gosdk.NewHTTPHandler(s, nil)
	v, err := bearer.New(t.Context(), &bearer.Options{HS256Secret: []byte(demoSecret)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/auth/mcp", v.Handler(h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func demoToken(t *testing.T, exp time.Time) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "exp": exp.Unix()}).SignedString([]byte(demoSecret))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestCallGuessBinarySearch plays guess_number with max=1000 by binary
// search through a pseudo-terminal. The secret is 1000, so the game takes
// 10 guesses, one more than go-sdk's own round loop allowed.
func TestCallGuessBinarySearch(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the command in a pseudo-terminal")
	}
	url := startDemoServer(t, 0) + "/mcp"
	tm, cmd := startTerminal(t, os.Args[0], "call", url, "guess_number", "--arg", "max=1000")
	lo, hi := 1, 1000
	for guesses := 1; ; guesses++ {
		if guesses > 10 {
			t.Fatalf("more than 10 guesses:\n%s", tm.screen)
		}
		tm.expect("guess: ")
		g := (lo + hi) / 2
		tm.answer(strconv.Itoa(g))
		tm.expect(strconv.Itoa(g) + "\n")
		// The next thing shown is a hint or the end.
		out := waitAny(t, tm, "higher than", "lower than", "correct: ")
		switch out {
		case "higher than":
			lo = g + 1
		case "lower than":
			hi = g - 1
		default:
			tm.expect(strconv.Itoa(g) + "\n")
			if guesses != 10 {
				t.Fatalf("won after %d guesses, want 10 (secret pinned to 1000)", guesses)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("%v\n%s", err, tm.screen)
			}
			return
		}
	}
}

// waitAny waits until the terminal shows one of subs after what was read,
// consumes it and returns it.
func waitAny(t *testing.T, tm *terminal, subs ...string) string {
	t.Helper()
	s := tm.screen
	timeout := time.After(20 * time.Second)
	for {
		s.mu.Lock()
		best, at := "", -1
		for _, sub := range subs {
			if i := bytes.Index(s.shown[s.read:], []byte(sub)); i >= 0 && (at < 0 || i < at) {
				best, at = sub, i
			}
		}
		if at >= 0 {
			s.read += at + len(best)
		}
		s.mu.Unlock()
		if at >= 0 {
			return best
		}
		select {
		case <-s.changed:
		case <-s.closed:
			t.Fatalf("the command ended without showing any of %q:\n%s", subs, s)
		case <-timeout:
			t.Fatalf("waited for any of %q; the command shows:\n%s", subs, s)
		}
	}
}

// Whose round limit was hit: the client's --max-rounds, or the server's
// (rounds_exceeded), each said as what it is.
func TestCallRoundLimits(t *testing.T) {
	t.Run("client", func(t *testing.T) {
		url := startDemoServer(t, 0) + "/mcp"
		out, _, err := runCall(t, t.Context(), strings.NewReader("1\n2\n3\n"), nil, url, "guess_number", "--arg", "max=1000", "--max-rounds", "3")
		testcmd.WantInOrder(t, out, "higher than 1: guess again (1-1000, 1 guess so far).", "higher than 2: guess again (1-1000, 2 guesses so far).")
		if !errors.Is(err, call.ErrClientRounds) || !strings.Contains(err.Error(), "asked for input a 4th time, and --max-rounds is 3") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("server", func(t *testing.T) {
		url := startDemoServer(t, 3) + "/mcp"
		// max 7 fits in 3 rounds; three wrong guesses make a 4th pause.
		_, _, err := runCall(t, t.Context(), strings.NewReader("1\n2\n3\n4\n"), nil, url, "guess_number", "--arg", "max=7")
		if err == nil || !strings.HasPrefix(err.Error(), "the server's round limit was reached: error -32602: invalid requestState") ||
			!strings.Contains(err.Error(), "rounds_exceeded") {
			t.Fatalf("%v", err)
		}
	})
}

func TestCallList(t *testing.T) {
	url := startDemoServer(t, 0) + "/mcp"
	out, _, err := runCall(t, t.Context(), strings.NewReader(""), nil, url)
	if err != nil {
		t.Fatal(err)
	}
	testcmd.WantInOrder(t, out,
		"Tools (mrtr call URL TOOL --arg k=v):\n",
		"  deploy: Deploys a service",
		"    service (string, required, at least 1 character, at most 64 characters, pattern ^[A-Za-z0-9][A-Za-z0-9._-]*$): service name\n",
		"    env (one of: staging, production, required): target environment\n",
		"  guess_number: ",
		"    max (integer, optional, >= 1, <= 1000): upper end of the range\n",
		"Prompts (mrtr call URL --prompt NAME --arg k=v):\n",
		"  test_prompt_with_arguments: A prompt with two required arguments.\n    arg1 (required): First test argument\n",
		"Resources (mrtr call URL --resource URI):\n",
		"  test://static-text (static-text, text/plain): A static text resource.\n",
		"  test://template/{id}/data (template: template-data, application/json)")
}

func TestCallPromptAndResource(t *testing.T) {
	url := startDemoServer(t, 0) + "/mcp"
	t.Run("prompt with arguments", func(t *testing.T) {
		out, _, err := runCall(t, t.Context(), strings.NewReader(""), nil, url, "--prompt", "test_prompt_with_arguments", "--arg", "arg1=a", "--arg", "arg2=42")
		if err != nil || !strings.Contains(out, "user: ") || !strings.Contains(out, "a") || !strings.Contains(out, "42") {
			t.Fatalf("%v\n%s", err, out)
		}
	})
	t.Run("prompt that asks", func(t *testing.T) {
		out, _, err := runCall(t, t.Context(), strings.NewReader("the README\n"), nil, url, "--prompt", "test_input_required_result_prompt")
		if err != nil {
			t.Fatal(err)
		}
		testcmd.WantInOrder(t, out, "What context should the prompt use?\n", "context: ", "a prompt built from the user's context\nuser: Context: the README\n")
	})
	t.Run("resource", func(t *testing.T) {
		out, _, err := runCall(t, t.Context(), strings.NewReader(""), nil, url, "--resource", "test://static-text")
		if err != nil || out == "" || strings.Contains(out, "[resource") {
			t.Fatalf("%v\n%q", err, out)
		}
		out, _, err = runCall(t, t.Context(), strings.NewReader(""), nil, url, "--resource", "test://static-binary")
		if err != nil || !strings.HasPrefix(out, "[resource test://static-binary, image/png, ") {
			t.Fatalf("%v\n%q", err, out)
		}
	})
	t.Run("resource that asks", func(t *testing.T) {
		base := startCallServer(t)
		out, _, err := runCall(t, t.Context(), strings.NewReader("open sesame\n"), nil, base+"/mcp", "--resource", "test://vault")
		if err != nil {
			t.Fatal(err)
		}
		testcmd.WantInOrder(t, out, "Password?\n", "password: ", "the vault is open\n")
	})
}

// Sampling is answered by the person at the terminal; roots come from
// --root, and the roots capability is declared only with it.
func TestCallSamplingAndRoots(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the command in a pseudo-terminal")
	}
	url := startDemoServer(t, 0) + "/mcp"
	for _, legacy := range []string{"--legacy=false", "--legacy"} {
		t.Run("sampling "+legacy, func(t *testing.T) {
			tm, cmd := startTerminal(t, os.Args[0], "call", url, "test_input_required_result_sampling", legacy)
			tm.expect("The server asks for a model's reply (sampling, up to 100 tokens); you are the model.\nuser: What is the capital of France?\nreply (:decline to refuse): ")
			tm.answer("Paris")
			tm.expect("The model answered: Paris\n")
			if err := cmd.Wait(); err != nil {
				t.Fatalf("%v\n%s", err, tm.screen)
			}
		})
	}
	t.Run("sampling declined", func(t *testing.T) {
		tm, cmd := startTerminal(t, os.Args[0], "call", url, "test_input_required_result_sampling")
		tm.expect("reply (:decline to refuse): ")
		tm.answer(":decline")
		tm.expect(`mrtr call: input request "capital_question": you refused the sampling request (decline)` + "\n")
		if err := cmd.Wait(); err == nil {
			t.Fatal("exit 0 after refusing the sampling request")
		}
	})
	t.Run("roots", func(t *testing.T) {
		out, _, err := runCall(t, t.Context(), strings.NewReader(""), nil, url, "test_input_required_result_list_roots",
			"--root", "file:///src/a", "--root", "file:///src/b")
		if err != nil || out != "Client roots: file:///src/a, file:///src/b\n" {
			t.Fatalf("%v %q", err, out)
		}
	})
	t.Run("no roots, no capability", func(t *testing.T) {
		out, _, err := runCall(t, t.Context(), strings.NewReader("bob\nhi\n"), nil, url, "test_input_required_result_capabilities")
		if err != nil || strings.Contains(out, "roots") {
			t.Fatalf("%v %q", err, out)
		}
		testcmd.WantInOrder(t, out, "What is your name?", "reply (:decline to refuse): ", "capabilities-ok: answered elicit_input, sample_input\n")
	})
}

// A refused request says why and what to do about it, not go-sdk's bare
// "Unauthorized" naming initialize.
func TestCallErrorHints(t *testing.T) {
	base := startDemoServer(t, 0)
	auth := base + "/auth/mcp"
	for _, tt := range []struct {
		name, token string
		want        []string
	}{
		{"no token", "", []string{"the server wants a bearer token (401 Unauthorized) and none was sent: pass --bearer TOKEN or set $MRTR_BEARER"}},
		{"garbage token", "not-a-jwt", []string{"the server refused the bearer token (401 Unauthorized (invalid_token))", "--bearer"}},
		{"expired token", demoToken(t, time.Now().Add(-time.Hour)), []string{"the server refused the bearer token (401 Unauthorized (invalid_token)): it may be expired"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runCall(t, t.Context(), strings.NewReader(""), map[string]string{"MRTR_BEARER": tt.token}, auth, "deploy")
			if err == nil {
				t.Fatal("no error")
			}
			testcmd.WantInOrder(t, err.Error(), tt.want...)
			if strings.Contains(err.Error(), "initialize") || (tt.token != "" && strings.Contains(err.Error(), tt.token)) {
				t.Fatalf("%v", err)
			}
		})
	}
	t.Run("valid token", func(t *testing.T) {
		out, _, err := runCall(t, t.Context(), strings.NewReader("y\n"), map[string]string{"MRTR_BEARER": demoToken(t, time.Now().Add(time.Hour))},
			auth, "deploy", "--arg", "service=api", "--arg", "env=staging")
		if err != nil || !strings.HasSuffix(out, "deployed api to staging\n") {
			t.Fatalf("%v %q", err, out)
		}
	})
	t.Run("404", func(t *testing.T) {
		_, _, err := runCall(t, t.Context(), strings.NewReader(""), nil, base+"/", "deploy")
		if err == nil || !strings.Contains(err.Error(), "404 Not Found for "+base+"/: is the path right? MCP servers usually answer at /mcp") {
			t.Fatalf("%v", err)
		}
	})
}

// addVaultResource adds test://vault, a resource that asks a password
// before it is read.
func addVaultResource(ad *gosdk.Adapter) {
	ask := mcp.InputRequestMap{"pw": &mcp.ElicitParams{Message: "Password?", RequestedSchema: map[string]any{
		"type": "object", "required": []string{"password"}, "properties": map[string]any{"password": map[string]any{"type": "string"}}}}}
	gosdk.AddResource(ad, &mcp.Resource{URI: "test://vault", Name: "vault"},
		func(ctx context.Context, req *mcp.ReadResourceRequest, flow *gosdk.ResourceFlow[struct{}]) (*mcp.ReadResourceResult, error) {
			ans, ok := flow.Elicited("pw")
			if !ok || ans.Content["password"] != "open sesame" {
				return flow.Ask(struct{}{}, ask)
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://vault", Text: "the vault is open"}}}, nil
		})
}
