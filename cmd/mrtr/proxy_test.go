package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
)

// startProxyCmd runs `mrtr proxy` in-process on a free loopback port and
// returns its /mcp URL and log.
func startProxyCmd(t *testing.T, args ...string) (string, *testcmd.Buffer) {
	t.Helper()
	return testcmd.Start(t, run, append([]string{"proxy"}, args...)...)
}

// TestProxyCommand: `mrtr proxy --upstream URL` seals an upstream's pause,
// passes only its own state back, refuses a replay (memory store by
// default), binds the token to the --auth-hs256-secret principal and
// does not pass the Authorization header on.
func TestProxyCommand(t *testing.T) {
	type seen struct {
		state, auth string
	}
	var (
		mu  sync.Mutex
		got []seen
	)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				RequestState *string `json:"requestState"`
			} `json:"params"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if req.Method == "ping" { // the proxy's check of its upstream
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{}})
			return
		}
		s := "<none>"
		if req.Params.RequestState != nil {
			s = *req.Params.RequestState
		}
		mu.Lock()
		got = append(got, seen{s, r.Header.Get("Authorization")})
		mu.Unlock()
		res := map[string]any{"resultType": "input_required", "requestState": "plain-upstream-state",
			"inputRequests": map[string]any{"ok": map[string]any{"method": "elicitation/create", "params": map[string]any{"message": "ok?", "requestedSchema": map[string]any{"type": "object"}}}}}
		if req.Params.RequestState != nil {
			res = map[string]any{"resultType": "complete", "content": []any{}}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": res})
	}))
	defer up.Close()
	secret := strings.Repeat("s", 32)
	// A scripted upstream, not a real server: no era probe.
	url, logs := startProxyCmd(t, "--upstream", up.URL, "--upstream-era", "modern", "--auth-hs256-secret", secret)
	if !strings.Contains(logs.String(), "NO KEY RING GIVEN") {
		t.Error("no loud warning for an ephemeral key ring")
	}
	bearer := func(sub string) string {
		return "Bearer " + testcmd.SignJWT(t, secret, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()}, jwt.SigningMethodHS256)
	}
	call := func(auth, state string) map[string]any {
		params := map[string]any{"name": "t", "_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}}}}
		if state != "" {
			params["requestState"] = state
			params["inputResponses"] = map[string]any{"ok": map[string]any{"action": "accept"}}
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized {
			return map[string]any{"status": 401}
		}
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if r := call("", ""); r["status"] != 401 {
		t.Fatalf("no bearer token: %v", r)
	}
	first := call(bearer("alice"), "")
	tok := first["result"].(map[string]any)["requestState"].(string)
	if tok == "plain-upstream-state" {
		t.Fatal("the upstream's state left the proxy")
	}
	if r := call(bearer("bob"), tok); r["error"].(map[string]any)["data"].(map[string]any)["reason"] != "invalid" {
		t.Fatalf("another principal's resume: %v", r)
	}
	if r := call(bearer("alice"), tok); r["result"].(map[string]any)["resultType"] != "complete" {
		t.Fatalf("resume: %v", r)
	}
	if r := call(bearer("alice"), tok); r["error"].(map[string]any)["data"].(map[string]any)["reason"] != "replayed" {
		t.Fatalf("replay: %v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0].state != "<none>" || got[1].state != "plain-upstream-state" || got[0].auth != "" || got[1].auth != "" {
		t.Fatalf("upstream saw %+v", got)
	}
	if strings.Contains(logs.String(), tok) {
		t.Fatal("a token in the log")
	}
}
