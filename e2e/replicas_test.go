package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/testing/testredis"
)

// replicaResume sends the resume of a paused test_elicitation call to url,
// bounded by ctx, and returns the result's content or the error's code
// and message.
func replicaResume(t *testing.T, ctx context.Context, url, bearer, state, key string) (content string, code int, message string) {
	t.Helper()
	answers := map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"username": "ada"}}}
	res, e := bridgeRPC(t, ctx, url, bearer, "test_elicitation", map[string]any{"message": "a"}, state, answers)
	if e != nil {
		return "", e.Code, e.Message + " " + string(e.Data)
	}
	return string(res["content"]), 0, ""
}

// TestReplicaForwarding: two `mrtr proxy` processes on one redis-server,
// each with its own stdio child (go-sdk's 2025-11-25-only everything-server
// v1.4.1), one key ring: a call paused on A and resumed on B completes (B
// forwards it to A, which holds it); the same token is then refused on A.
// A new pause on A, then A stopped at once (--drain-timeout 0): its resume
// on B is an error telling the client to start over, not a hang.
func TestReplicaForwarding(t *testing.T) {
	bin := legacyEverything(t)
	rurl := testredis.Start(t)
	args := []string{"--keys", mnKeyRing(t, "k1"), "--server-id", mnServerID, "--replay", rurl, "--auth-hs256-secret", bridgeSecret, "--drain-timeout", "0", "--", bin}
	aURL, aPID := startProxyPID(t, args...)
	bURL := startProxy(t, args...)
	alice := mintAlice(t, bridgeSecret)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	st, k := pauseOnce(t, aURL, alice, "test_elicitation", map[string]any{"message": "a"})
	if content, code, msg := replicaResume(t, ctx, bURL, alice, st, k); code != 0 || !strings.Contains(content, "username:ada") {
		t.Fatalf("resume on B of a call held by A: %s %d %s", content, code, msg)
	}
	if _, code, msg := replicaResume(t, ctx, aURL, alice, st, k); code != -32602 || !strings.Contains(msg, "replayed") {
		t.Fatalf("the same token on A: want -32602 replayed, got %d %s", code, msg)
	}

	st, k = pauseOnce(t, aURL, alice, "test_elicitation", map[string]any{"message": "a"})
	if err := syscall.Kill(aPID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Gone means reaped by startProxyPID's waiter: ESRCH, not a zombie.
	for deadline := time.Now().Add(30 * time.Second); !errors.Is(syscall.Kill(aPID, 0), syscall.ESRCH); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("mrtr proxy A (pid %d) still running 30 s after SIGTERM", aPID)
		}
	}
	if _, code, msg := replicaResume(t, ctx, bURL, alice, st, k); code != -32603 || !strings.Contains(msg, "start the call over") {
		t.Fatalf("resume on B of a call held by the stopped A: want -32603 telling to start over, got %d %s", code, msg)
	}
}

// readyzOf returns the status and the body of /readyz beside an /mcp URL.
func readyzOf(t *testing.T, mcpURL string) (int, string) {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(mcpURL, "/mcp") + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// exitedWithin reports whether p exits within d; it fails t unless the
// exit status is 0.
func exitedWithin(t *testing.T, p *proxyProc, d time.Duration) bool {
	t.Helper()
	select {
	case <-p.exited:
		if p.waitErr != nil {
			t.Errorf("mrtr proxy (pid %d) exited with %v:\n%s", p.pid, p.waitErr, tail(p.logs.String(), 40))
		}
		return true
	case <-time.After(d):
		return false
	}
}

// TestReplicaDrain pins issue 28 item 3, a rolling restart of two
// replicas on one redis-server (go-sdk's 2025-11-25-only everything-server
// v1.4.1 bridged on each): a call paused on A; A gets SIGTERM: its /readyz
// answers 503 at once, but it goes on running; the resume, sent to B, is
// forwarded to A and completes; then A exits 0 on its own, long before its
// --drain-timeout.
func TestReplicaDrain(t *testing.T) {
	bin := legacyEverything(t)
	rurl := testredis.Start(t)
	args := []string{"--keys", mnKeyRing(t, "k1"), "--server-id", mnServerID, "--replay", rurl, "--auth-hs256-secret", bridgeSecret, "--drain-timeout", "2m", "--", bin}
	a := startProxyProc(t, args...)
	bURL := startProxy(t, args...)
	alice := mintAlice(t, bridgeSecret)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	st, k := pauseOnce(t, a.url, alice, "test_elicitation", map[string]any{"message": "a"})
	if err := syscall.Kill(a.pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, body := readyzOf(t, a.url)
		if code == http.StatusServiceUnavailable && strings.Contains(body, `"drain":"draining"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz of A after SIGTERM: %d %s, want 503 with drain: draining", code, body)
		}
	}
	if exitedWithin(t, a, time.Second) {
		t.Fatalf("A exited while it holds a call:\n%s", tail(a.logs.String(), 30))
	}
	if content, code, msg := replicaResume(t, ctx, bURL, alice, st, k); code != 0 || !strings.Contains(content, "username:ada") {
		t.Fatalf("resume on B of the call held by the draining A: %s %d %s", content, code, msg)
	}
	if !exitedWithin(t, a, 30*time.Second) {
		t.Fatalf("A still runs 30 s after its last held call ended:\n%s", tail(a.logs.String(), 30))
	}
	logs := a.logs.String()
	if d, ok := drainStart(logs); !ok || d.Held != 1 {
		t.Errorf("drain start line: %+v %v, want held 1:\n%s", d, ok, tail(logs, 30))
	}
	if !strings.Contains(logs, `"msg":"mrtr drained: no call held or in flight"`) {
		t.Errorf("no line saying A drained:\n%s", tail(logs, 30))
	}
}

// TestProxyDrainCutShort pins issue 28 item 3: a bridged proxy holding a
// call (go-sdk's 2025-11-25-only everything-server v1.4.1 over stdio)
// stops at once at a second SIGTERM, and on its own once --drain-timeout
// has passed, exiting 0 either way and saying what was lost.
func TestProxyDrainCutShort(t *testing.T) {
	bin := legacyEverything(t)
	for _, tc := range []struct {
		name, timeout, want string
		second              bool
	}{
		{"second signal", "10m", "mrtr stopping at once (second signal)", true},
		{"drain timeout", "3s", "mrtr drain timed out (--drain-timeout)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProxyProc(t, "--auth-hs256-secret", bridgeSecret, "--drain-timeout", tc.timeout, "--", bin)
			pauseOnce(t, p.url, mintAlice(t, bridgeSecret), "test_elicitation", map[string]any{"message": "a"})
			if err := syscall.Kill(p.pid, syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if exitedWithin(t, p, time.Second) {
				t.Fatalf("exited within 1 s of the first SIGTERM while it holds a call:\n%s", tail(p.logs.String(), 30))
			}
			if tc.second {
				if err := syscall.Kill(p.pid, syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			if !exitedWithin(t, p, 10*time.Second) {
				t.Fatalf("still running 10 s later:\n%s", tail(p.logs.String(), 30))
			}
			if logs := p.logs.String(); !strings.Contains(logs, tc.want) {
				t.Fatalf("no %q in the log:\n%s", tc.want, tail(logs, 30))
			}
			if d, ok := drainStart(p.logs.String()); !ok || d.Held != 1 {
				t.Errorf("drain start line: %+v %v, want held 1", d, ok)
			}
		})
	}
}
