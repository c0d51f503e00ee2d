package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/call"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/task"
)

// TestCallTask drives `mrtr call` against `mrtr serve`'s task fixtures
// (internal/app/demo, fixtures_tasks.go): a tool that answers with a task
// is followed to its end, its status changes printed to stderr, its
// questions asked at the prompt as a paused call's are, the answers sent
// with tasks/update, and its result printed as a completed call's; a
// tool error exits 1, a failed task is its JSON-RPC error.
func TestCallTask(t *testing.T) {
	url, _ := startServe(t)
	for _, tt := range []struct {
		name, stdin string
		args        []string
		wantErr     string
		out, errOut []string
	}{
		{"confirm", "y\n", []string{"confirm_delete", "--arg", "filename=notes.txt"}, "",
			[]string{"Delete notes.txt?\n(answer :decline to refuse, :cancel or Ctrl-D to dismiss)\n", "confirm [y/n]: ", "deleted notes.txt\n"},
			[]string{": working\n", "task: input_required\n", "task: completed\n"}},
		{"keep", "n\n", []string{"confirm_delete", "--arg", "filename=notes.txt"}, "",
			[]string{"confirm [y/n]: ", "kept notes.txt\n"}, nil},
		{"two questions", "y\nAda\n", []string{"multi_input"}, "",
			[]string{"Go ahead?", "confirm [y/n]: ", "What is your name?", "name: ", `name "Ada", confirmed true`}, nil},
		{"tool error", "", []string{"failing_job"}, "tool failing_job reported an error",
			nil, []string{"task: completed\n", "the job failed: its input was not valid\n"}},
		{"failed", "", []string{"protocol_error_job"}, "error -32603: internal error",
			nil, []string{"task: failed"}},
		{"timeout", "", []string{"slow_compute", "--arg", "seconds=300", "--timeout", "2s"},
			"the task did not end within 2s (--timeout 0 waits for as long as it takes)", nil, []string{": working\n", ": cancel sent\n"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := runCall(t, t.Context(), strings.NewReader(tt.stdin), nil, append([]string{url}, tt.args...)...)
			if (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
				t.Fatalf("error %v, want %q\nstdout:\n%s\nstderr:\n%s", err, tt.wantErr, out, errOut)
			}
			testcmd.WantInOrder(t, out, tt.out...)
			testcmd.WantInOrder(t, errOut, tt.errOut...)
		})
	}
}

// TestCallTaskInterrupted: Ctrl-C while a task works ends the call with
// tasks/cancel, and the server's task is cancelled.
func TestCallTaskInterrupted(t *testing.T) {
	url, _ := startServe(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stderr testcmd.Buffer
	a := &base.App{Stdin: strings.NewReader(""), Stdout: &testcmd.Buffer{}, Stderr: &stderr, Getenv: func(string) string { return "" }}
	done := make(chan error, 1)
	go func() {
		done <- call.Cmd.Run(ctx, a, []string{url, "slow_compute", "--arg", "seconds=300", "--arg", "label=long"})
	}()
	started := regexp.MustCompile(`task (\S+): working`)
	var id string
	for deadline := time.Now().Add(30 * time.Second); id == ""; time.Sleep(10 * time.Millisecond) {
		if m := started.FindStringSubmatch(stderr.String()); m != nil {
			id = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no task started:\n%s", stderr.String())
		}
	}
	cancel()
	if err := <-done; err == nil || err.Error() != "interrupted" {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "task "+id+": cancel sent\n") {
		t.Fatalf("stderr:\n%s", stderr.String())
	}
	// All anonymous callers are one principal: this request sees the task.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		res, rpcErr := testcmd.RPCPost(t, url, task.MethodGet, map[string]any{"taskId": id, "_meta": map[string]any{
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{task.Extension: map[string]any{}}}}})
		var status string
		json.Unmarshal(res["status"], &status)
		if status == "cancelled" {
			break
		}
		if rpcErr != nil || time.Now().After(deadline) {
			t.Fatalf("the task after Ctrl-C: %s %v", res["status"], rpcErr)
		}
	}
}

// TestCallTaskBearer: every tasks/* request carries the bearer token
// ($MRTR_BEARER), so a task created for its principal is followed to its
// end, for each of two principals (e2e TestReplicaTasks pins that one
// principal cannot reach another's task).
func TestCallTaskBearer(t *testing.T) {
	secret := strings.Repeat("s", 32)
	url, _ := startServe(t, "--auth-hs256-secret", secret)
	token := func(sub string) string {
		return testcmd.SignJWT(t, secret, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()}, jwt.SigningMethodHS256)
	}
	out, errOut, err := runCall(t, t.Context(), strings.NewReader("y\n"), map[string]string{"MRTR_BEARER": token("alice")},
		url, "confirm_delete", "--arg", "filename=notes.txt")
	if err != nil || !strings.HasSuffix(out, "deleted notes.txt\n") {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	if _, _, err := runCall(t, t.Context(), strings.NewReader(""), nil, url, "slow_compute", "--arg", "seconds=0"); err == nil ||
		!strings.Contains(err.Error(), "bearer token") {
		t.Fatalf("without a token: %v, want a refusal", err)
	}
	_, errOut, err = runCall(t, t.Context(), strings.NewReader(""), map[string]string{"MRTR_BEARER": token("bob")},
		url, "slow_compute", "--arg", "seconds=0")
	if err != nil || !strings.Contains(errOut, "task: completed") {
		t.Fatalf("bob's own task: %v\n%s", err, errOut)
	}
}

// TestCallTaskThroughProxy: `mrtr call` follows a task created through
// `mrtr proxy` in front of `mrtr serve`: the id it polls and answers is
// the proxy's sealed one (never serve's own), and the task's question,
// answer and result pass as they do against serve directly.
func TestCallTaskThroughProxy(t *testing.T) {
	upstream, _ := startServe(t)
	url, _ := startProxyCmd(t, "--upstream", upstream)
	out, errOut, err := runCall(t, t.Context(), strings.NewReader("y\nAda\n"), nil, url, "multi_input")
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	testcmd.WantInOrder(t, out, "Go ahead?", "confirm [y/n]: ", "What is your name?", "name: ", `name "Ada", confirmed true`)
	m := regexp.MustCompile(`task (\S+): working`).FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("no task followed:\n%s", errOut)
	}
	if !strings.HasPrefix(m[1], "t1.") {
		t.Errorf("the caller saw task id %q, not one the proxy sealed", m[1])
	}
}
