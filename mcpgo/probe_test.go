package mcpgo_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/probe"
	"github.com/mrtr-go/mrtr/internal/testing/fakeclock"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// plainStateServer is an equivalent of mcp-go v1.2.1's
// examples/multi_round_trip, served over its Streamable HTTP transport:
// deploy (and rollback, the same handler under a second name, so that a
// state can move) keeps "env=<environment>" as a plain requestState and
// trusts it on the retry.
func plainStateServer(t *testing.T) string {
	t.Helper()
	srv := server.NewMCPServer("deploy-server", "1.0.0", server.WithToolCapabilities(true), server.WithElicitation())
	for _, name := range []string{"deploy", "rollback"} {
		srv.AddTool(mcp.NewTool(name,
			mcp.WithDescription(name+"s the application, after confirming with the user"),
			mcp.WithString("environment", mcp.Description("the environment to "+name), mcp.Required()),
		), deployHandler)
	}
	hs := httptest.NewServer(server.NewStreamableHTTPServer(srv))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp"
}

// deployHandler is the example's deploy.
func deployHandler(_ context.Context, request mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	environment := request.GetString("environment", "staging")
	if answer := server.ElicitationResponse(request.Params.InputResponses, "confirm"); answer != nil {
		if answer.Action != mcp.ElicitationResponseActionAccept {
			return mcp.NewToolResultText("deployment cancelled"), nil
		}
		content, _ := answer.Content.(map[string]any)
		if approved, _ := content["approve"].(bool); !approved {
			return mcp.NewToolResultText("deployment declined"), nil
		}
		return mcp.NewToolResultText("deployed to " + strings.TrimPrefix(request.Params.RequestState, "env=")), nil
	}
	return server.NewInputRequestBuilder("env="+environment).
		Elicit("confirm", mcp.ElicitationParams{
			Mode:    mcp.ElicitationModeForm,
			Message: fmt.Sprintf("Deploy to %s?", environment),
			RequestedSchema: map[string]any{
				"type":       "object",
				"properties": map[string]any{"approve": map[string]any{"type": "boolean"}},
				"required":   []string{"approve"},
			},
		}).
		ToolResult(), nil
}

// TestProbePlainState: the example's state reads as "env=...", and as it
// is never checked, tampering, moving, changed arguments and a 1 MiB
// state run its decline path ("deployment cancelled"); behind the sealing
// proxy (callers told apart by their bearer token, the guard on a fake
// clock that the expired check's wait advances) every check passes.
func TestProbePlainState(t *testing.T) {
	up := plainStateServer(t)
	rep, err := probe.Run(t.Context(), &probe.HTTPTarget{URL: up, Bearer: "alice", BearerOther: "bob"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]probe.Verdict{
		"readable": probe.Warn, "tampered": probe.Fail, "moved": probe.Fail, "arguments_changed": probe.Fail,
		"replayed": probe.Warn, "another_caller": probe.Fail, "expired": probe.Skip, "oversized": probe.Fail,
		"not_a_string": probe.Pass, "error_shape": probe.Skip,
	}
	wantVerdicts(t, "direct", rep, want)
	if d := rep.Get(probe.CheckReadable).Detail; !strings.Contains(d, `text containing the argument value "mrtr-probe"`) {
		t.Errorf("readable: %s", d)
	}
	if d := rep.Get(probe.CheckTampered).Detail; !strings.Contains(d, `middle flip: ACCEPTED (complete "deployment cancelled")`) {
		t.Errorf("tampered: %s", d)
	}

	ring, err := reqstate.GenerateKeyRing("probe", nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := fakeclock.New(time.Now())
	guard := mrtr.New(reqstate.New(ring, nil), &mrtr.Options{ServerID: "probe", Store: replay.NewMemory(nil), Now: clock.Now, TTL: time.Minute})
	h, err := proxy.New(proxy.Options{Upstream: up, Guard: guard, Principal: func(r *http.Request) (reqstate.Principal, error) {
		return reqstate.Principal{Issuer: "probe", Subject: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	px := httptest.NewServer(h)
	t.Cleanup(px.Close)
	rep, err = probe.Run(t.Context(), &probe.HTTPTarget{URL: px.URL + "/mcp", Bearer: "alice", BearerOther: "bob"}, &probe.Options{
		Wait:  2 * time.Minute,
		Sleep: func(_ context.Context, d time.Duration) error { clock.Advance(d); return nil },
		Now:   clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	for n := range want {
		want[n] = probe.Pass
	}
	wantVerdicts(t, "proxied", rep, want)
}

func wantVerdicts(t *testing.T, name string, rep *probe.Report, want map[string]probe.Verdict) {
	t.Helper()
	got := rep.Verdicts()
	for _, n := range probe.Names {
		if got[n] != want[n] {
			t.Errorf("%s: %s: %s, want %s (%s)", name, n, got[n], want[n], rep.Get(n).Detail)
		}
	}
	if rep.Failed() != (want["tampered"] == probe.Fail) {
		t.Errorf("%s: Failed() = %v", name, rep.Failed())
	}
}
