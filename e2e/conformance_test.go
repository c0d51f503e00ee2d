package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/internal/app/demo"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// requireEnv makes the harness mandatory: set in CI, where a missing
// harness must fail rather than skip.
const requireEnv = "MRTR_REQUIRE_CONFORMANCE"

// needHarness skips t when the pinned harness (conformance/node_modules) is
// not installed or not current (scripts/conformance-setup.sh --check), or
// fails t when MRTR_REQUIRE_CONFORMANCE=1. It installs nothing: that is
// `make deps`.
func needHarness(t testing.TB) {
	t.Helper()
	harnessSetup.need(t)
}

var (
	harnessSetup    = &setupCheck{script: "conformance-setup.sh", requireEnv: requireEnv}
	everythingSetup = &setupCheck{script: "everything-setup.sh", requireEnv: requireEnv}
	inspectorSetup  = &setupCheck{script: "inspector-setup.sh", requireEnv: inspectorRequireEnv}
)

// setupCheck is what one of the scripts/*-setup.sh scripts installs, as
// the tests see it: they run the script's --check, which installs
// nothing, once per test binary, and skip (or, with requireEnv=1, fail)
// when it is missing or stale. Installs belong to `make deps`, which runs
// each script without --check.
type setupCheck struct {
	root       string // the repository, holding scripts/script; "": repoRoot
	script     string
	requireEnv string

	once sync.Once
	err  error // nil: installed and current
}

// check runs the script's --check once and returns what is missing or
// stale, or nil.
func (c *setupCheck) check() error {
	c.once.Do(func() {
		root := cmp.Or(c.root, repoRoot)
		cmd := exec.Command("bash", filepath.Join(root, "scripts", c.script), "--check")
		cmd.Dir = root
		// The script's message says what is missing or stale and to run
		// `make deps`.
		if out, err := cmd.CombinedOutput(); err != nil {
			c.err = fmt.Errorf("scripts/%s --check (%v): %s", c.script, err, bytes.TrimSpace(out))
		}
	})
	return c.err
}

// verdict says what a test that needs the setup does: nothing (both
// empty), skip with the message skip, or fail with the message fail.
func (c *setupCheck) verdict() (skip, fail string) {
	err := c.check()
	switch {
	case err == nil:
		return "", ""
	case os.Getenv(c.requireEnv) == "1":
		return "", fmt.Sprintf("%s=1 but %v", c.requireEnv, err)
	}
	return fmt.Sprintf("%v (set %s=1 to make this a failure)", err, c.requireEnv), ""
}

// need skips or fails t as verdict says.
func (c *setupCheck) need(t testing.TB) {
	t.Helper()
	skip, fail := c.verdict()
	if fail != "" {
		t.Fatal(fail)
	}
	if skip != "" {
		t.Skip(skip)
	}
}

// harnessRun is one run of scripts/conformance-run.sh.
type harnessRun struct {
	dir    string // where the harness wrote its checks.json files
	exit   int    // the script's exit code
	output string // stdout and stderr, interleaved
	total  string // its closing "Total: N passed, M failed" line, if any
}

var (
	totalLine = regexp.MustCompile(`(?m)^Total: \d+ passed, \d+ failed.*$`)
	ansi      = regexp.MustCompile("\x1b\\[[0-9;]*m") // the harness colours its console output
)

// checkStatuses reads the checks.json files the harness wrote under dir and
// returns the status of every check by id.
func checkStatuses(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*", "checks.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no checks.json under %s (%v)", dir, err)
	}
	statuses := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var checks []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		if err := json.Unmarshal(data, &checks); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, c := range checks {
			statuses[c.ID] = c.Status
		}
	}
	return statuses
}

// runHarness runs scripts/conformance-run.sh URL MODE args... and logs its
// totals. env entries are added to the script's environment; the results
// go to a temporary directory unless env sets CONFORMANCE_OUT_DIR.
func runHarness(t *testing.T, url string, env []string, args ...string) harnessRun {
	t.Helper()
	dir := ""
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "CONFORMANCE_OUT_DIR="); ok {
			dir = v
		}
	}
	if dir == "" {
		dir = t.TempDir()
		env = append(env, "CONFORMANCE_OUT_DIR="+dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(repoRoot, "scripts", "conformance-run.sh"), url}, args...)...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	r := harnessRun{dir: dir, output: ansi.ReplaceAllString(out.String(), "")}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && ctx.Err() == nil:
		r.exit = exit.ExitCode()
	default:
		t.Fatalf("conformance-run.sh %s: %v\n%s", strings.Join(args, " "), err, tail(r.output, 80))
	}
	if all := totalLine.FindAllString(r.output, -1); len(all) > 0 {
		r.total = all[len(all)-1]
	}
	summary := ""
	for _, line := range strings.Split(r.output, "\n") {
		if strings.HasPrefix(line, "conformance-run: ") && strings.Contains(line, " checks: ") {
			summary = strings.TrimPrefix(line, "conformance-run: ")
		}
	}
	t.Logf("conformance %s: exit %d; %s", strings.Join(args, " "), r.exit, strings.Join(nonEmpty(r.total, summary), "; "))
	return r
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// mustPass fails t, printing the tail of the output, unless the run exited 0.
func (r harnessRun) mustPass(t *testing.T) {
	t.Helper()
	if r.exit != 0 {
		t.Fatalf("conformance run failed (exit %d). Output tail:\n%s", r.exit, tail(r.output, 80))
	}
}

func TestConformance2026(t *testing.T) {
	needHarness(t)
	t.Parallel()
	url := startServe(t)
	r := runHarness(t, url, nil, "req-2026")
	r.mustPass(t)
	r.mustHaveRun(t, "req-2026")
}

// TestConformanceDraft runs every scenario introduced in 2026-07-28, the
// pending SEP-2243 header ones included, and requires all of them to pass.
// The script's own gate (exit 3) also fails the run on any WARNING in an
// input-required-result-* scenario. None needs a baseline today; should an
// unscored extension or pending scenario ever have to be excused, list it
// (with the reason) in conformance/expected-failures.yml and it is passed as
// --expected-failures. The harness then fails the run when a listed scenario
// passes, and counts every WARNING as a failure, so a baseline cannot go
// stale silently.
func TestConformanceDraft(t *testing.T) {
	needHarness(t)
	t.Parallel()
	url := startServe(t)
	var args []string
	baseline := filepath.Join(repoRoot, "conformance", "expected-failures.yml")
	if _, err := os.Stat(baseline); err == nil {
		args = append(args, "--expected-failures", baseline)
	}
	r := runHarness(t, url, nil, append([]string{"draft"}, args...)...)
	r.mustPass(t)
	r.mustHaveRun(t, "draft")
	// The pinned harness has 14 input-required-result-* scenarios; fewer
	// would mean the gate silently stopped covering some.
	m := regexp.MustCompile(`MRTR gate ok: (\d+) input-required-result-`).FindStringSubmatch(r.output)
	if m == nil {
		t.Fatalf("no \"MRTR gate ok\" line in the draft run. Output tail:\n%s", tail(r.output, 40))
	}
	if n, _ := strconv.Atoi(m[1]); n < 14 {
		t.Errorf("the draft run covered %d input-required-result-* scenarios, want all 14", n)
	}
}

// TestConformance2025 runs the 2025-11-25 requirements (the stateful,
// initialize-handshake wire) against the same kind of server: its one /mcp
// endpoint serves both wires.
func TestConformance2025(t *testing.T) {
	needHarness(t)
	t.Parallel()
	url := startServe(t)
	r := runHarness(t, url, nil, "req-2025")
	r.mustPass(t)
	r.mustHaveRun(t, "req-2025")
}

// tamperBlindCodec is a deliberately broken codec: it strips the suffix the
// harness appends before opening, so a tampered token opens as if intact.
// It exists only to prove that the conformance suite catches a broken token
// check.
type tamperBlindCodec struct{ reqstate.Codec }

func (c tamperBlindCodec) Open(b reqstate.Binding, token string) (*reqstate.State, error) {
	return c.Codec.Open(b, strings.TrimSuffix(token, "-TAMPERED"))
}

const (
	tamperScenario = "input-required-result-tampered-state"
	tamperCheck    = "sep-2322-reject-tampered-state"
)

// TestConformanceCatchesBrokenTokenCheck is the negative control: the same
// scenario must fail against a server whose token check is broken and pass
// against the real `mrtr serve`.
func TestConformanceCatchesBrokenTokenCheck(t *testing.T) {
	needHarness(t)
	t.Parallel()

	ring, err := reqstate.GenerateKeyRing("e2e", nil)
	if err != nil {
		t.Fatal(err)
	}
	real := reqstate.New(ring, nil)
	broken := tamperBlindCodec{real}

	// The wrapper really is blind to the tampering, and the real codec is not.
	b := reqstate.Binding{Method: "tools/call", ProtocolVersion: "2026-07-28", Target: "x", ServerID: "e2e"}
	now := time.Now()
	tok, err := real.Seal(b, &reqstate.State{Continuation: []byte(`{}`), Round: 1, IssuedAt: now, ExpiresAt: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := real.Open(b, tok+"-TAMPERED"); err == nil {
		t.Fatal("the real codec opened a tampered token")
	}
	if _, err := broken.Open(b, tok+"-TAMPERED"); err != nil {
		t.Fatalf("the broken codec rejected a tampered token: %v", err)
	}

	guard := mrtr.New(broken, &mrtr.Options{ServerID: "e2e-broken", Store: replay.NewMemory(nil)})
	mux := http.NewServeMux()
	mux.Handle("/mcp", gosdk.NewHTTPHandler(demo.NewServer(guard, nil), nil))
	srv := httptest.NewUnstartedServer(mux)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)

	// The check itself must flip, not just the exit code: a server that
	// fails for any other reason would prove nothing.
	badDir := t.TempDir()
	bad := runHarness(t, srv.URL+"/mcp", []string{"CONFORMANCE_OUT_DIR=" + badDir}, "scenario", tamperScenario)
	if got := checkStatuses(t, badDir)[tamperCheck]; bad.exit == 0 || got != "FAILURE" {
		t.Errorf("against a server that accepts tampered state the harness exited %d with %s %q, want non-zero and FAILURE. Output:\n%s",
			bad.exit, tamperCheck, got, tail(bad.output, 60))
	}

	goodDir := t.TempDir()
	good := runHarness(t, startServe(t), []string{"CONFORMANCE_OUT_DIR=" + goodDir}, "scenario", tamperScenario)
	good.mustPass(t)
	if got := checkStatuses(t, goodDir)[tamperCheck]; got != "SUCCESS" {
		t.Errorf("against mrtr serve %s is %q, want SUCCESS. Output:\n%s", tamperCheck, got, tail(good.output, 60))
	}
}
