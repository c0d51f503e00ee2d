package gosdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	mrtrbearer "github.com/mrtr-go/mrtr/bearer"
	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/internal/testing/testissuer"
	"github.com/mrtr-go/mrtr/reqstate"
)

// bearerEnv is one MCP server (one guard, one key ring) reachable through
// three doors: /a/mcp trusts issuer A, /b/mcp issuer B (both through
// RequireBearer), /sdk/mcp issuer A through go-sdk's own
// RequireBearerToken and TokenVerifier.
type bearerEnv struct {
	*env
	a, b   *testissuer.Issuer
	va, vb *mrtrbearer.Verifier
}

func startBearerServer(t *testing.T) *bearerEnv {
	t.Helper()
	ring, err := reqstate.GenerateKeyRing("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	g := mrtr.New(reqstate.New(ring, nil), nil)
	s := mcp.NewServer(&mcp.Implementation{Name: "mrtr-bearer-test", Version: "1"}, nil)
	a := gosdk.Install(s, g, nil)
	gosdk.AddTool(a, &mcp.Tool{Name: "deploy"},
		func(ctx context.Context, req *mcp.CallToolRequest, args deployArgs, flow *gosdk.ToolFlow[deployState]) (*mcp.CallToolResult, error) {
			st, resumed := flow.State()
			if !resumed {
				return flow.Ask(deployState(args), confirmRequest("deploy "+args.Service+"?"))
			}
			if ans, ok := flow.Elicited("confirm"); !ok || ans.Content["approve"] != true {
				return flow.Ask(st, confirmRequest("please answer"))
			}
			return text(fmt.Sprintf("deployed %s to %s", st.Service, st.Env)), nil
		})
	h := gosdk.NewHTTPHandler(s, nil)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	e := &bearerEnv{env: &env{url: srv.URL}, a: testissuer.New(t), b: testissuer.New(t)}
	verifier := func(is *testissuer.Issuer, path string) *mrtrbearer.Verifier {
		v, err := mrtrbearer.New(t.Context(), &mrtrbearer.Options{Issuer: is.URL, Audience: srv.URL + path, JWKS: is.JWKSURL()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Close() })
		return v
	}
	e.va, e.vb = verifier(e.a, "/a/mcp"), verifier(e.b, "/b/mcp")
	mux.Handle("/a/mcp", gosdk.RequireBearer(e.va, h))
	mux.Handle("/b/mcp", gosdk.RequireBearer(e.vb, h))
	for _, p := range e.va.MetadataPaths() {
		mux.Handle(p, e.va.MetadataHandler())
	}
	vsdk := verifier(e.a, "/sdk/mcp")
	mux.Handle("/sdk/mcp", auth.RequireBearerToken(gosdk.TokenVerifier(vsdk), &auth.RequireBearerTokenOptions{ResourceMetadataURL: vsdk.MetadataURL()})(h))
	// Scopes on the bearer side through go-sdk's middleware: refused, 401.
	vscope, err := mrtrbearer.New(t.Context(), &mrtrbearer.Options{Issuer: e.a.URL, Audience: srv.URL + "/scoped/mcp", JWKS: e.a.JWKSURL(), Scopes: []string{"mcp:tools"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vscope.Close() })
	mux.Handle("/scoped/mcp", auth.RequireBearerToken(gosdk.TokenVerifier(vscope), nil)(h))
	return e
}

func (e *bearerEnv) token(t *testing.T, is *testissuer.Issuer, sub, path string, mod func(*testissuer.Claims)) string {
	c := is.Claims(sub, e.url+path, time.Now())
	if mod != nil {
		mod(&c)
	}
	return testissuer.Mint(t, is.Key("ec-1"), c)
}

func TestBearerFlowAndPrincipals(t *testing.T) {
	e := startBearerServer(t)
	aliceA := e.token(t, e.a, "alice", "/a/mcp", nil)

	// A multi-round flow completes through go-sdk's client with a bearer token.
	for _, path := range []string{"/a/mcp", "/sdk/mcp"} {
		cs := connect(t, e.env, clientOpts{path: path, token: e.token(t, e.a, "alice", path, nil)})
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: prodArgs})
		if err != nil || resultText(t, res) != "deployed api to production" {
			t.Fatalf("%s: %v %+v", path, err, res)
		}
	}

	// A state sealed for alice at issuer A opens for nobody else.
	alice := connect(t, e.env, clientOpts{manual: true, path: "/a/mcp", token: aliceA})
	tok := pauseDeploy(t, alice, prodArgs)
	ans := accept(map[string]any{"approve": true})
	resume := func(cs *mcp.ClientSession) (*mcp.CallToolResult, error) {
		return cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: prodArgs, RequestState: tok, InputResponses: ans})
	}
	bob := connect(t, e.env, clientOpts{manual: true, path: "/a/mcp", token: e.token(t, e.a, "bob", "/a/mcp", nil)})
	aliceB := connect(t, e.env, clientOpts{manual: true, path: "/b/mcp", token: e.token(t, e.b, "alice", "/b/mcp", nil)})
	for _, cs := range []*mcp.ClientSession{bob, aliceB} {
		_, err := resume(cs)
		wantReject(t, err, mrtr.ReasonInvalid)
	}
	if res, err := resume(alice); err != nil || resultText(t, res) != "deployed api to production" {
		t.Fatalf("alice at A: %v %+v", err, res)
	}
}

func TestBearerRefusalsOverHTTP(t *testing.T) {
	e := startBearerServer(t)
	post := func(path, token string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, e.url+path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
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
	meta := e.va.MetadataURL()
	noSub := e.token(t, e.a, "", "/a/mcp", nil)
	for _, c := range []struct {
		name, path, token, want string
	}{
		{"no token", "/a/mcp", "", `Bearer resource_metadata="` + meta + `"`},
		{"no sub", "/a/mcp", noSub, `Bearer error="invalid_token", resource_metadata="` + meta + `"`},
		{"token for B at A", "/a/mcp", e.token(t, e.b, "alice", "/a/mcp", nil), `Bearer error="invalid_token", resource_metadata="` + meta + `"`},
		{"token for /b at /a", "/a/mcp", e.token(t, e.a, "alice", "/b/mcp", nil), `Bearer error="invalid_token", resource_metadata="` + meta + `"`},
		{"no sub through go-sdk", "/sdk/mcp", e.token(t, e.a, "", "/sdk/mcp", nil), ""},
		{"missing scope through go-sdk", "/scoped/mcp", e.token(t, e.a, "alice", "/scoped/mcp", nil), ""},
	} {
		resp := post(c.path, c.token)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s: status %d", c.name, resp.StatusCode)
		}
		if got := resp.Header.Get("WWW-Authenticate"); c.want != "" && got != c.want {
			t.Fatalf("%s: WWW-Authenticate %q, want %q", c.name, got, c.want)
		}
	}
	withScope := e.token(t, e.a, "alice", "/scoped/mcp", func(c *testissuer.Claims) { c.Scope = "mcp:tools" })
	if resp := post("/scoped/mcp", withScope); resp.StatusCode != http.StatusOK {
		t.Fatalf("token with the scope through go-sdk: %d", resp.StatusCode)
	}
	resp, err := http.Get(meta)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m mrtrbearer.ResourceMetadata
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.Resource != e.url+"/a/mcp" || len(m.AuthorizationServers) != 1 || m.AuthorizationServers[0] != e.a.URL {
		t.Fatalf("metadata %+v", m)
	}
}
