package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/probe"
	"github.com/mrtr-go/mrtr/internal/testing/testissuer"
)

// probeReport is what `mrtr probe --json` writes.
type probeReport struct {
	URL     string `json:"url"`
	Command string `json:"command"`
	probe.Report
}

// runProbe runs `mrtr probe URL --json args...` (the binary TestMain
// built) and returns its report and exit status.
func runProbe(t *testing.T, url string, args ...string) (*probeReport, int) {
	t.Helper()
	return runProbeArgs(t, append([]string{url, "--json"}, args...)...)
}

// runStdioProbe runs `mrtr probe --json args... -- command...`.
func runStdioProbe(t *testing.T, command []string, args ...string) (*probeReport, int) {
	t.Helper()
	return runProbeArgs(t, append(append(append([]string{"--json"}, args...), "--"), command...)...)
}

func runProbeArgs(t *testing.T, args ...string) (*probeReport, int) {
	t.Helper()
	cmd := exec.Command(mrtrBin, append([]string{"probe"}, args...)...)
	cmd.Env = serverEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	code := 0
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("mrtr probe: %v", err)
		}
		code = ee.ExitCode()
	}
	var rep probeReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("mrtr probe %q (exit %d) wrote no JSON report (%v): %s\nstderr: %s", args, code, err, stdout.String(), stderr.String())
	}
	return &rep, code
}

// wantProbe checks every check's verdict and the exit status that goes
// with them (mrtr probe --help): 1 when a check fails, else 3 when every
// check is skipped (nothing could be checked), else 4 when tampered,
// moved or arguments_changed warns or is skipped other than for --tool
// without --other-tool (incomplete), else 0. On a mismatch it logs the
// whole report.
func wantProbe(t *testing.T, rep *probeReport, code int, want map[string]probe.Verdict) {
	t.Helper()
	got := rep.Verdicts()
	bad := false
	for _, n := range probe.Names {
		if got[n] != want[n] {
			t.Errorf("%s: %s, want %s (%s)", n, got[n], want[n], rep.Get(n).Detail)
			bad = true
		}
	}
	fail, skipped, incomplete := false, 0, false
	for n, v := range want {
		fail = fail || v == probe.Fail
		if v == probe.Skip {
			skipped++
		}
		if slices.Contains(probe.Essential, n) && (v == probe.Warn ||
			v == probe.Skip && !strings.Contains(rep.Get(n).Detail, "--tool without --other-tool")) {
			incomplete = true
		}
	}
	wantCode := 0
	switch {
	case fail:
		wantCode = 1
	case skipped == len(probe.Names):
		wantCode = 3
	case incomplete:
		wantCode = 4
	}
	if code != wantCode {
		t.Errorf("exit status %d, want %d (incomplete %v, unchecked %q)", code, wantCode, rep.Incomplete, rep.Unchecked)
	}
	if bad {
		b, _ := json.MarshalIndent(rep, "", "  ")
		t.Logf("report:\n%s", b)
	}
}

// wantDetail checks that the detail of check contains each of subs.
func wantDetail(t *testing.T, rep *probeReport, check string, subs ...string) {
	t.Helper()
	d := rep.Get(check).Detail
	for _, s := range subs {
		if !strings.Contains(d, s) {
			t.Errorf("%s detail %q lacks %q", check, d, s)
		}
	}
}

// allPass is the report of a server that protects its state.
var allPass = func() map[string]probe.Verdict {
	m := map[string]probe.Verdict{}
	for _, n := range probe.Names {
		m[n] = probe.Pass
	}
	return m
}()

// verdicts builds a want map from "name=verdict" pairs.
func verdicts(pairs ...string) map[string]probe.Verdict {
	m := map[string]probe.Verdict{}
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		m[k] = probe.Verdict(v)
	}
	return m
}

// probeAuth is an HS256 secret for --auth-hs256-secret and two callers'
// tokens under it.
type probeAuth struct{ secret, alice, bob string }

func newProbeAuth(t *testing.T) probeAuth {
	secret := "probe-e2e-secret-0123456789abcdef0123456789"
	mint := func(sub string) string {
		now := time.Now()
		return testissuer.MintHS256(t, []byte(secret), "", testissuer.Claims{Issuer: "e2e", Subject: sub, IssuedAt: now, Expiry: now.Add(time.Hour)})
	}
	return probeAuth{secret: secret, alice: mint("alice"), bob: mint("bob")}
}

// sealing are the flags of serve and proxy under which every check can
// pass: two callers, and a state lifetime (1 s, plus the guard's 5 s
// leeway) that --wait 7s outlasts.
func (a probeAuth) sealing() []string {
	return []string{"--auth-hs256-secret", a.secret, "--ttl", "1s", "--anonymous-ttl", "1s"}
}

func (a probeAuth) callers() []string {
	return []string{"--bearer", a.alice, "--bearer-other", a.bob, "--wait", "7s"}
}

// acceptConfirm writes --answers accepting the `confirm` form of the
// everything-server and ts-upstream.mjs, and returns its path.
func acceptConfirm(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "answers.json")
	if err := os.WriteFile(p, []byte(`{"confirm":{"action":"accept","content":{"ok":true}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	evTampered = "test_input_required_result_tampered_state"
	evState    = "test_input_required_result_request_state"
)

// TestProbeEverything: go-sdk's everything-server v1.8.0 refuses the
// conformance suite's -TAMPERED suffix and accepts every other tampering
// (the middle flip included); its states are readable and move between
// tools. Behind mrtr proxy every check passes. Its stateful mode speaks
// 2025-11-25 only: reported, every check skipped.
func TestProbeEverything(t *testing.T) {
	t.Parallel()
	up := startEverything(t, true)

	t.Run("direct", func(t *testing.T) {
		t.Parallel()
		// Declined answers: the tool found first (multi_round) moves on
		// whatever its state says.
		rep, code := runProbe(t, up)
		wantProbe(t, rep, code, verdicts("readable=warn", "tampered=fail", "moved=fail", "arguments_changed=fail",
			"replayed=warn", "another_caller=skip", "expired=skip", "oversized=fail", "not_a_string=pass", "error_shape=skip"))
		if rep.Tool != "test_input_required_result_multi_round" {
			t.Errorf("tool %s, want test_input_required_result_multi_round", rep.Tool)
		}
		wantDetail(t, rep, probe.CheckReadable, `key=value text "round=1"`)
	})
	t.Run("direct/tampered_state", func(t *testing.T) {
		t.Parallel()
		// The conformance fixture, answers accepted: the known gap.
		rep, code := runProbe(t, up, "--tool", evTampered, "--answers", acceptConfirm(t))
		wantProbe(t, rep, code, verdicts("readable=warn", "tampered=fail", "moved=skip", "arguments_changed=fail",
			"replayed=warn", "another_caller=skip", "expired=skip", "oversized=fail", "not_a_string=pass", "error_shape=pass"))
		wantDetail(t, rep, probe.CheckTampered,
			`suffix -TAMPERED: refused (error -32602 "invalid requestState: tampered")`,
			`middle flip: ACCEPTED (complete "state-ok: requestState received`)
	})
	t.Run("direct/declined", func(t *testing.T) {
		t.Parallel()
		// Declined, the fixture starts over on any state: only the suffix
		// is told apart, the rest is inconclusive.
		rep, code := runProbe(t, up, "--tool", evTampered)
		wantProbe(t, rep, code, verdicts("readable=warn", "tampered=warn", "moved=skip", "arguments_changed=warn",
			"replayed=warn", "another_caller=skip", "expired=skip", "oversized=warn", "not_a_string=pass", "error_shape=pass"))
		wantDetail(t, rep, probe.CheckTampered, "suffix -TAMPERED: refused", "middle flip: inconclusive")
	})
	t.Run("proxied", func(t *testing.T) {
		t.Parallel()
		auth := newProbeAuth(t)
		px := startProxied(t, up, auth.sealing()...)
		rep, code := runProbe(t, px, append(auth.callers(), "--tool", evTampered, "--other-tool", evState, "--answers", acceptConfirm(t))...)
		wantProbe(t, rep, code, allPass)
		wantDetail(t, rep, probe.CheckTampered, `middle flip: refused (error -32602 "invalid requestState" (invalid))`)
		wantDetail(t, rep, probe.CheckReplayed, `first complete "state-ok: requestState received`)
	})
	t.Run("legacy", func(t *testing.T) {
		t.Parallel()
		rep, code := runProbe(t, startEverything(t, false))
		wantProbe(t, rep, code, verdicts("readable=skip", "tampered=skip", "moved=skip", "arguments_changed=skip",
			"replayed=skip", "another_caller=skip", "expired=skip", "oversized=skip", "not_a_string=skip", "error_shape=skip"))
		if rep.Era != probe.LegacyVersion {
			t.Errorf("era %s, want %s", rep.Era, probe.LegacyVersion)
		}
	})
}

// TestProbeEverythingStdio: the same everything-server over stdio (mrtr
// probe -- COMMAND) gets the verdicts TestProbeEverything pins over HTTP,
// another_caller skipped for stdio's one caller. Run by mrtr proxy -- COMMAND
// and probed over HTTP, every check passes, expired included (--wait
// past a 1 s lifetime).
func TestProbeEverythingStdio(t *testing.T) {
	t.Parallel()
	bin := needEverything(t)
	everything := []string{bin}

	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		rep, code := runStdioProbe(t, everything)
		wantProbe(t, rep, code, verdicts("readable=warn", "tampered=fail", "moved=fail", "arguments_changed=fail",
			"replayed=warn", "another_caller=skip", "expired=skip", "oversized=fail", "not_a_string=pass", "error_shape=skip"))
		if rep.Era != probe.ModernVersion || rep.Tool != "test_input_required_result_multi_round" || rep.Command != "everything-server" {
			t.Errorf("era %s, tool %s, command %s", rep.Era, rep.Tool, rep.Command)
		}
		wantDetail(t, rep, probe.CheckReadable, `key=value text "round=1"`)
		wantDetail(t, rep, probe.CheckAnotherCaller, "stdio has one caller")
		wantDetail(t, rep, probe.CheckMoved, "sent to prompts/get test_input_required_result_prompt: not refused")
	})
	t.Run("stdio/tampered_state", func(t *testing.T) {
		t.Parallel()
		rep, code := runStdioProbe(t, everything, "--tool", evTampered, "--answers", acceptConfirm(t))
		wantProbe(t, rep, code, verdicts("readable=warn", "tampered=fail", "moved=skip", "arguments_changed=fail",
			"replayed=warn", "another_caller=skip", "expired=skip", "oversized=fail", "not_a_string=pass", "error_shape=pass"))
		wantDetail(t, rep, probe.CheckTampered,
			`suffix -TAMPERED: refused (error -32602 "invalid requestState: tampered")`,
			`middle flip: ACCEPTED (complete "state-ok: requestState received`)
	})
	t.Run("stdio/declined", func(t *testing.T) {
		t.Parallel()
		rep, code := runStdioProbe(t, everything, "--tool", evTampered)
		wantProbe(t, rep, code, verdicts("readable=warn", "tampered=warn", "moved=skip", "arguments_changed=warn",
			"replayed=warn", "another_caller=skip", "expired=skip", "oversized=warn", "not_a_string=pass", "error_shape=pass"))
		wantDetail(t, rep, probe.CheckTampered, "suffix -TAMPERED: refused", "middle flip: inconclusive")
	})
	t.Run("proxied", func(t *testing.T) {
		t.Parallel()
		auth := newProbeAuth(t)
		px := startProxy(t, append(auth.sealing(), append([]string{"--"}, everything...)...)...)
		rep, code := runProbe(t, px, append(auth.callers(), "--tool", evTampered, "--other-tool", evState, "--answers", acceptConfirm(t))...)
		wantProbe(t, rep, code, allPass)
		wantDetail(t, rep, probe.CheckTampered, `middle flip: refused (error -32602 "invalid requestState" (invalid))`)
		wantDetail(t, rep, probe.CheckMoved, "sent to prompts/get test_input_required_result_prompt: refused (error -32602")
		wantDetail(t, rep, probe.CheckExpired, "retried after 7s: refused")
	})
}

// TestProbeTypeScript: a server on @modelcontextprotocol/server 2.4.0
// keeping plain JSON state is readable and accepts tampering, moving and
// changed arguments; with createRequestStateCodec tampering and moving
// are refused, replay is not (multi-use), and the signed state is still
// readable. Behind mrtr proxy every check passes.
func TestProbeTypeScript(t *testing.T) {
	needHarness(t)
	t.Parallel()
	t.Run("plain", func(t *testing.T) {
		t.Parallel()
		rep, code := runProbe(t, startTSUpstream(t))
		wantProbe(t, rep, code, verdicts("readable=warn", "tampered=fail", "moved=fail", "arguments_changed=fail",
			"replayed=warn", "another_caller=skip", "expired=skip", "oversized=fail", "not_a_string=pass", "error_shape=skip"))
		wantDetail(t, rep, probe.CheckReadable, "a JSON object with keys amount, to")
	})
	t.Run("codec", func(t *testing.T) {
		t.Parallel()
		rep, code := runProbe(t, startTSUpstream(t, "codec"))
		wantProbe(t, rep, code, verdicts("readable=warn", "tampered=pass", "moved=pass", "arguments_changed=fail",
			"replayed=warn", "another_caller=skip", "expired=skip", "oversized=pass", "not_a_string=pass", "error_shape=warn"))
		wantDetail(t, rep, probe.CheckReadable, "a JSON object with keys b, exp, p")
	})
	t.Run("proxied", func(t *testing.T) {
		t.Parallel()
		auth := newProbeAuth(t)
		px := startProxied(t, startTSUpstream(t), auth.sealing()...)
		rep, code := runProbe(t, px, append(auth.callers(), "--tool", "transfer", "--other-tool", "audit", "--arg", "to=bob", "--arg", "amount=5", "--answers", acceptConfirm(t))...)
		wantProbe(t, rep, code, allPass)
		wantDetail(t, rep, probe.CheckReplayed, `first complete "transferred 5 to bob"`)
	})
}

// TestProbeServe: the reference server passes every check, finding its
// pausable tools itself.
func TestProbeServe(t *testing.T) {
	t.Parallel()
	auth := newProbeAuth(t)
	rep, code := runProbe(t, startServe(t, auth.sealing()...), auth.callers()...)
	wantProbe(t, rep, code, allPass)
}
