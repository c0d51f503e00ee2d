package e2e

import (
	"context"
	"errors"
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
// A new pause on A, then A stopped: its resume on B is an error telling the
// client to start over, not a hang.
func TestReplicaForwarding(t *testing.T) {
	bin := legacyEverything(t)
	rurl := testredis.Start(t)
	args := []string{"--keys", mnKeyRing(t, "k1"), "--server-id", mnServerID, "--replay", rurl, "--auth-hs256-secret", bridgeSecret, "--", bin}
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
