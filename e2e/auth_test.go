package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/internal/testing/testissuer"
)

// The auth tests run `mrtr serve` as an OAuth resource server in front of
// in-process issuers (internal/testing/testissuer, on 127.0.0.1) and drive it with
// go-sdk's client carrying bearer tokens.

// authNode is one `mrtr serve --auth-*` process.
type authNode struct {
	url string // http://127.0.0.1:PORT/mcp, also its --auth-audience
	iss *testissuer.Issuer
}

// freeAddr returns a loopback address that was free a moment ago: the
// audience must name the server's own URL before it starts.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startAuthNode serves with tokens of iss, found through --auth-jwks or,
// when discovery is set, through the issuer's discovery document.
func startAuthNode(t *testing.T, iss *testissuer.Issuer, discovery bool, args ...string) *authNode {
	t.Helper()
	addr := freeAddr(t)
	n := &authNode{url: "http://" + addr + "/mcp", iss: iss}
	full := []string{"--auth-issuer", iss.URL, "--auth-audience", n.url}
	if !discovery {
		full = append(full, "--auth-jwks", iss.JWKSURL())
	}
	mnStart(t, addr, nil, append(full, args...)...)
	return n
}

// startAuthProxy runs `mrtr proxy` in front of upstream with tokens of
// iss, like startAuthNode.
func startAuthProxy(t *testing.T, upstream string, iss *testissuer.Issuer, discovery bool, args ...string) *authNode {
	t.Helper()
	addr := freeAddr(t)
	n := &authNode{url: "http://" + addr + "/mcp", iss: iss}
	full := []string{"--addr", addr, "--auth-issuer", iss.URL, "--auth-audience", n.url}
	if !discovery {
		full = append(full, "--auth-jwks", iss.JWKSURL())
	}
	if got := startProxied(t, upstream, append(full, args...)...); got != n.url {
		t.Fatalf("proxy serving at %s, want %s", got, n.url)
	}
	return n
}

// token mints a token for sub at the node's issuer, for the node.
func (n *authNode) token(t *testing.T, sub string) string {
	return testissuer.Mint(t, n.iss.Key("rsa-1"), n.iss.Claims(sub, n.url, time.Now()))
}

type withBearer struct {
	base  http.RoundTripper
	token string
}

func (b withBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

func bearerClient(t *testing.T, token string) *http.Client {
	return &http.Client{Transport: withBearer{base: mnTransport(t), token: token}}
}

// TestAuthJWKS: go-sdk's client completes multi-round flows with a bearer
// token; a state sealed for alice at issuer A opens neither for bob at A
// nor for alice at issuer B, even on a node with the same keys and server
// id; tokens are refused with RFC 6750 / RFC 9728 answers.
func TestAuthJWKS(t *testing.T) {
	t.Parallel()
	issA, issB := testissuer.New(t), testissuer.New(t)
	ring := mnKeyRing(t, "k1")
	shared := []string{"--keys", ring, "--server-id", mnServerID}
	a := startAuthNode(t, issA, false, shared...)
	b := startAuthNode(t, issB, true, shared...) // keys found by discovery

	t.Run("flows", func(t *testing.T) {
		bearerFlows(t, "mrtr-e2e-auth", a.url, a.token(t, "alice"), 30*time.Second)
	})

	t.Run("principals", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		aliceA := mnConnect(t, a.url, bearerClient(t, a.token(t, "alice")))
		bobA := mnConnect(t, a.url, bearerClient(t, a.token(t, "bob")))
		aliceB := mnConnect(t, b.url, bearerClient(t, b.token(t, "alice")))
		state, err := aliceA.pauseDeploy(ctx, "billing")
		if err != nil {
			t.Fatal(err)
		}
		_, err = bobA.resumeDeploy(ctx, "billing", state)
		mnWantReject(t, "bob at issuer A", err, "invalid")
		_, err = aliceB.resumeDeploy(ctx, "billing", state)
		mnWantReject(t, "alice at issuer B", err, "invalid")
		// Both nodes work for their own callers, and the state for its owner.
		if _, err := aliceB.pauseDeploy(ctx, "billing"); err != nil {
			t.Fatalf("alice at B: %v", err)
		}
		text, err := aliceA.resumeDeploy(ctx, "billing", state)
		if err != nil || text != mnDeployed("billing") {
			t.Fatalf("alice at A: %q %v", text, err)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		meta := strings.Replace(a.url, "/mcp", "/.well-known/oauth-protected-resource/mcp", 1)
		post := func(token string) *http.Response {
			req, _ := http.NewRequest(http.MethodPost, a.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
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
		for _, c := range []struct{ name, token, want string }{
			{"no token", "", `Bearer resource_metadata="` + meta + `"`},
			{"token from issuer B", b.token(t, "alice"), `Bearer error="invalid_token", resource_metadata="` + meta + `"`},
			{"token for node B", testissuer.Mint(t, issA.Key("ec-1"), issA.Claims("alice", b.url, time.Now())), `Bearer error="invalid_token", resource_metadata="` + meta + `"`},
		} {
			resp := post(c.token)
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != c.want {
				t.Errorf("%s: %d %q, want 401 %q", c.name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), c.want)
			}
		}
		// The metadata URL from the challenge serves RFC 9728 metadata.
		resp, err := http.Get(meta)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m struct {
			Resource               string   `json:"resource"`
			AuthorizationServers   []string `json:"authorization_servers"`
			BearerMethodsSupported []string `json:"bearer_methods_supported"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatalf("metadata: %v", err)
		}
		if resp.StatusCode != 200 || m.Resource != a.url || strings.Join(m.AuthorizationServers, ",") != issA.URL ||
			strings.Join(m.BearerMethodsSupported, ",") != "header" {
			t.Fatalf("metadata: %d %+v", resp.StatusCode, m)
		}
		// go-sdk's client without a token does not get in.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = mcp.NewClient(&mcp.Implementation{Name: "anonymous", Version: "1"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: a.url, HTTPClient: &http.Client{Transport: mnTransport(t)}}, nil)
		if err == nil {
			t.Fatal("a client without a token connected")
		}
	})
}

// TestAuthTypeScript: the TypeScript client (conformance/interop.mjs)
// completes deploy and guess_number with a bearer token against
// `mrtr serve --auth-jwks ...`.
func TestAuthTypeScript(t *testing.T) {
	needHarness(t)
	t.Parallel()
	n := startAuthNode(t, testissuer.New(t), false)
	dir := filepath.Join(repoRoot, "conformance")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "node"), "interop.mjs", n.url)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MRTR_INTEROP_BEARER="+n.token(t, "alice"))
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
	if res.Deploy.IsError || res.Deploy.Text != "deployed billing to production" {
		t.Errorf("deploy: text %q, isError %v", res.Deploy.Text, res.Deploy.IsError)
	}
	if g := res.Guess; g.IsError || g.Text != fmt.Sprintf("correct: %d", g.Secret) || g.Guesses < 2 {
		t.Errorf("guess_number: text %q, isError %v, %d guesses", g.Text, g.IsError, g.Guesses)
	}
	if res.Wire.WithState < 2 {
		t.Errorf("TS client resumed %d times, want >= 2", res.Wire.WithState)
	}
}

// TestAuthProxy: the same through `mrtr proxy` in front of an anonymous
// `mrtr serve`: go-sdk's client completes both flows with a bearer token,
// and a state sealed by the proxy for alice at issuer A opens neither for
// bob at A nor for alice at issuer B (another proxy with the same keys and
// server id).
func TestAuthProxy(t *testing.T) {
	t.Parallel()
	upstream := startServe(t)
	issA, issB := testissuer.New(t), testissuer.New(t)
	shared := []string{"--keys", mnKeyRing(t, "k1"), "--server-id", mnServerID}
	a := startAuthProxy(t, upstream, issA, false, shared...)
	b := startAuthProxy(t, upstream, issB, true, shared...)

	bearerFlows(t, "mrtr-e2e-auth-proxy", a.url, a.token(t, "alice"), 60*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	aliceA := mnConnect(t, a.url, bearerClient(t, a.token(t, "alice")))
	bobA := mnConnect(t, a.url, bearerClient(t, a.token(t, "bob")))
	aliceB := mnConnect(t, b.url, bearerClient(t, b.token(t, "alice")))
	state, err := aliceA.pauseDeploy(ctx, "billing")
	if err != nil {
		t.Fatal(err)
	}
	_, err = bobA.resumeDeploy(ctx, "billing", state)
	mnWantReject(t, "bob at issuer A", err, "invalid")
	_, err = aliceB.resumeDeploy(ctx, "billing", state)
	mnWantReject(t, "alice at issuer B", err, "invalid")
	if text, err := aliceA.resumeDeploy(ctx, "billing", state); err != nil || text != mnDeployed("billing") {
		t.Fatalf("alice at A: %q %v", text, err)
	}

	// Unauthenticated: 401 pointing at the proxy's metadata, which parses.
	resp, err := http.Post(a.url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	meta := strings.Replace(a.url, "/mcp", "/.well-known/oauth-protected-resource/mcp", 1)
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != `Bearer resource_metadata="`+meta+`"` {
		t.Fatalf("no token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	mr, err := http.Get(meta)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Body.Close()
	var m struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := json.NewDecoder(mr.Body).Decode(&m); err != nil || m.Resource != a.url || strings.Join(m.AuthorizationServers, ",") != issA.URL {
		t.Fatalf("proxy metadata: %+v %v", m, err)
	}
}

// bearerFlows runs the demo flows with go-sdk's client against url,
// sending token as a bearer token and answering every elicitation.
func bearerFlows(t *testing.T, name, url, token string, timeout time.Duration) {
	t.Helper()
	u := &user{}
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1.0.0"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			content, err := u.answer(r.Params.Message, r.Params.RequestedSchema)
			if err != nil {
				return nil, err
			}
			return &mcp.ElicitResult{Action: "accept", Content: content}, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: bearerClient(t, token)}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	defer cs.Close()
	runFlows(t, u, func(ctx context.Context, tool string, args map[string]any) (string, bool, error) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			return "", false, err
		}
		return goSDKText(res), res.IsError, nil
	})
}
