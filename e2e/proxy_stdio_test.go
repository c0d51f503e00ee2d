package e2e

import (
	"regexp"
	"testing"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/probe"
)

// startProxiedStdio runs `mrtr proxy -- everything-server`: go-sdk's
// conformance everything-server as a stdio child, every client sharing
// it (bridge.Direct), and returns the proxy's /mcp URL.
func startProxiedStdio(t *testing.T) string {
	t.Helper()
	return startProxy(t, "--", needEverything(t))
}

// TestProxyConformance2026Stdio: the everything-server over stdio behind
// the proxy passes the 2026-07-28 requirements as it does over HTTP: the
// Streamable HTTP rules a stdio child cannot apply (the request _meta,
// the required and custom headers, subscriptions/listen streams) are
// applied in front of it, and all 14 MRTR scenarios pass through the
// sealing with the proxy's one intended warning.
func TestProxyConformance2026Stdio(t *testing.T) {
	needHarness(t)
	t.Parallel()
	url := startProxiedStdio(t)
	dir := t.TempDir()
	runHarness(t, url, []string{"CONFORMANCE_OUT_DIR=" + dir}, "req-2026").mustPass(t)
	ran, bad := proxyMRTRResults(t, dir)
	for name := range mrtrScenarioChecks() {
		if !ran[name] {
			t.Errorf("scenario %s did not run", name)
		}
	}
	if len(bad) != 1 || bad[0] != proxyIgnoredAnswers {
		t.Fatalf("warnings or failures in input-required-result-* scenarios through the proxy: %q, want exactly %q", bad, proxyIgnoredAnswers)
	}
}

// TestProxyRefusesWhatUpstreamAcceptsStdio: the state flip the bare
// everything-server accepts (TestProxyRefusesWhatUpstreamAccepts) is
// refused when the same server is the proxy's stdio child, and the
// intact token completes through it.
func TestProxyRefusesWhatUpstreamAcceptsStdio(t *testing.T) {
	const tool = "test_input_required_result_tampered_state"
	confirm := map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}

	up := startEverything(t, true)
	direct := rawCall(t, up, tool, "", nil)
	st, _ := direct["result"].(map[string]any)["requestState"].(string)
	if st == "" {
		t.Fatalf("the everything-server issued no requestState: %v", direct)
	}
	if res, _ := rawCall(t, up, tool, probe.FlipMiddle(st), confirm)["result"].(map[string]any); res == nil || res["resultType"] != "complete" {
		t.Fatal("direct: the bare everything-server refused a flipped state; the test premise is gone")
	}

	px := startProxiedStdio(t)
	first := rawCall(t, px, tool, "", nil)
	tok, _ := first["result"].(map[string]any)["requestState"].(string)
	if tok == "" || tok == st {
		t.Fatalf("through the proxy: want a sealed requestState, got %v", first)
	}
	refused := rawCall(t, px, tool, probe.FlipMiddle(tok), confirm)
	e, _ := refused["error"].(map[string]any)
	if e == nil || e["code"] != float64(-32602) || e["message"] != mrtr.RejectMessage || e["data"].(map[string]any)["reason"] != "invalid" {
		t.Fatalf("through the proxy: a flipped token was not refused as invalid: %v", refused)
	}
	if r, _ := rawCall(t, px, tool, tok, confirm)["result"].(map[string]any); r == nil || r["resultType"] != "complete" {
		t.Fatal("through the proxy: the intact token did not complete")
	}
}

// TestProxyConformanceDraftStdio: every scenario introduced in
// 2026-07-28 through the proxy with the everything-server as its stdio
// child; the script's MRTR gate allows only proxyIgnoredAnswers.
func TestProxyConformanceDraftStdio(t *testing.T) {
	needHarness(t)
	t.Parallel()
	url := startProxiedStdio(t)
	r := runHarness(t, url, []string{"CONFORMANCE_MRTR_ALLOW=" + proxyIgnoredAnswersID}, "draft")
	r.mustPass(t)
	m := regexp.MustCompile(`MRTR gate ok: (\d+) input-required-result-`).FindStringSubmatch(r.output)
	if m == nil || m[1] != "14" {
		t.Fatalf("want \"MRTR gate ok: 14\", got %q. Output tail:\n%s", m, tail(r.output, 40))
	}
}
