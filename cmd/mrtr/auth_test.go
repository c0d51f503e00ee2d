package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/node"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/proxy"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/serve"
	"github.com/mrtr-go/mrtr/internal/testing/testissuer"
)

// TestServeAuthJWKSFile runs serve in-process with a JWKS file: no token
// is 401 pointing at the metadata, the metadata parses, a token of the
// file's key gets through, and one without the required scope gets 403.
func TestServeAuthJWKSFile(t *testing.T) {
	dir := t.TempDir()
	jwks := filepath.Join(dir, "jwks.json")
	k1 := testissuer.NewKey(t, "k1", "EdDSA")
	if err := os.WriteFile(jwks, testissuer.JWKS(k1), 0o600); err != nil {
		t.Fatal(err)
	}
	const iss, aud = "https://id.example", "https://mcp.example.com/mcp"
	url, _ := startServe(t, "--auth-jwks", jwks, "--auth-issuer", iss, "--auth-audience", aud, "--auth-scopes", "mcp:tools")
	post := func(token string) *http.Response {
		req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/list")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := post("")
	want := `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("no token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	base := strings.TrimSuffix(url, "/mcp")
	for _, p := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		mr, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		err = json.NewDecoder(mr.Body).Decode(&m)
		mr.Body.Close()
		if err != nil || mr.StatusCode != 200 || m["resource"] != aud {
			t.Fatalf("%s: %d %v %v", p, mr.StatusCode, m, err)
		}
	}
	claims := testissuer.Claims{Issuer: iss, Subject: "alice", Audience: []string{aud}, Scope: "mcp:tools", Expiry: time.Now().Add(time.Hour)}
	if resp := post(testissuer.Mint(t, k1, claims)); resp.StatusCode != 200 {
		t.Fatalf("k1 token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	claims.Scope = "mcp:read"
	if resp := post(testissuer.Mint(t, k1, claims)); resp.StatusCode != 403 ||
		!strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), `Bearer error="insufficient_scope"`) {
		t.Fatalf("token without the scope: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}

// mintTyp signs claims with k, its kid in the header and typ set to typ
// (none at all when typ is "").
func mintTyp(t *testing.T, k *testissuer.Key, claims testissuer.Claims, typ string) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.GetSigningMethod(k.Alg), claims.MapClaims())
	tok.Header["kid"] = k.ID
	delete(tok.Header, "typ")
	if typ != "" {
		tok.Header["typ"] = typ
	}
	s, err := tok.SignedString(k.Signer)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAuthRequireTypFlag: --auth-require-typ (or $MRTR_AUTH_REQUIRE_TYP)
// reaches the verifier of `mrtr serve` and `mrtr proxy`: a token without
// typ, or with typ JWT, is refused with 401; at+jwt and application/at+JWT
// get through. Without the flag typ is not looked at.
func TestAuthRequireTypFlag(t *testing.T) {
	dir := t.TempDir()
	jwks := filepath.Join(dir, "jwks.json")
	k1 := testissuer.NewKey(t, "k1", "ES256")
	if err := os.WriteFile(jwks, testissuer.JWKS(k1), 0o600); err != nil {
		t.Fatal(err)
	}
	const iss, aud = "https://id.example", "https://mcp.example.com/mcp"
	claims := testissuer.Claims{Issuer: iss, Subject: "alice", Audience: []string{aud}, Expiry: time.Now().Add(time.Hour)}
	authArgs := []string{"--auth-jwks", jwks, "--auth-issuer", iss, "--auth-audience", aud}

	// The flag and the variable both set it, on both commands.
	none := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	env := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string {
		return map[string]string{"MRTR_AUTH_REQUIRE_TYP": "true"}[k]
	}}
	for _, tc := range []struct {
		a    *base.App
		args []string
		want bool
	}{
		{none, nil, false},
		{none, []string{"--auth-require-typ"}, true},
		{env, nil, true},
		{env, []string{"--auth-require-typ=false"}, false},
	} {
		sc, err := serve.Parse(tc.a, append(slices.Clone(authArgs), tc.args...))
		if err != nil {
			t.Fatal(err)
		}
		pc, err := proxy.Parse(tc.a, append([]string{"--upstream", "http://127.0.0.1:1/mcp"}, append(slices.Clone(authArgs), tc.args...)...))
		if err != nil {
			t.Fatal(err)
		}
		for cmd, c := range map[string]*node.AuthConfig{"serve": &sc.Auth, "proxy": &pc.Auth} {
			v, err := c.Verifier(t.Context(), slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			v.Close()
			if v.RequireTyp() != tc.want {
				t.Errorf("%s %q (env %v): RequireTyp %v, want %v", cmd, tc.args, tc.a == env, v.RequireTyp(), tc.want)
			}
		}
	}

	post := func(url, token string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/list")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), `Bearer error="invalid_token"`) {
			t.Errorf("401 without invalid_token: %q", resp.Header.Get("WWW-Authenticate"))
		}
		return resp.StatusCode
	}
	var upstreamCalls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamCalls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`)
	}))
	defer up.Close()
	strictServe, _ := startServe(t, append(slices.Clone(authArgs), "--auth-require-typ")...)
	laxServe, _ := startServe(t, authArgs...)
	strictProxy, _ := startProxyCmd(t, append([]string{"--upstream", up.URL + "/mcp", "--auth-require-typ"}, authArgs...)...)
	for _, tc := range []struct {
		typ    string
		strict int
	}{
		{"", 401},
		{"JWT", 401},
		{"at+jwt", 200},
		{"application/at+JWT", 200},
	} {
		tok := mintTyp(t, k1, claims, tc.typ)
		if got := post(strictServe, tok); got != tc.strict {
			t.Errorf("serve --auth-require-typ, typ %q: %d, want %d", tc.typ, got, tc.strict)
		}
		if got := post(laxServe, tok); got != 200 {
			t.Errorf("serve, typ %q: %d, want 200", tc.typ, got)
		}
		before := upstreamCalls.Load()
		if got := post(strictProxy, tok); got != tc.strict {
			t.Errorf("proxy --auth-require-typ, typ %q: %d, want %d", tc.typ, got, tc.strict)
		}
		if reached := upstreamCalls.Load() - before; (reached != 0) != (tc.strict == 200) {
			t.Errorf("proxy --auth-require-typ, typ %q: the upstream saw %d calls", tc.typ, reached)
		}
	}
}
