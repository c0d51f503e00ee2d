//go:build linux

package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// inspectorRequireEnv makes the Inspector test mandatory: set by `make test`, where a
// missing chromium or Inspector install must fail rather than skip.
const inspectorRequireEnv = "MRTR_REQUIRE_INSPECTOR"

// inspectorRunTimeout bounds one driver run (Inspector start, browser, the whole flow).
// A run takes 5-15 s here; the driver's own budget (--timeout) is shorter, so that it
// fails first with the step it was at and a screenshot.
const (
	inspectorRunTimeout = 3 * time.Minute
	inspectorDriverSecs = "150"
)

// needInspector skips t when the browser test's setup (Debian's chromium and
// inspector/node_modules from scripts/inspector-setup.sh) is missing or not
// current (the script's --check), or fails t when MRTR_REQUIRE_INSPECTOR=1.
// It installs nothing: that is `make deps`.
func needInspector(t *testing.T) {
	t.Helper()
	inspectorSetup.need(t)
}

// inspectorArtifacts is where the driver keeps its screenshots: $MRTR_ARTIFACTS, or the
// gitignored e2e/artifacts.
func inspectorArtifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MRTR_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(repoRoot, "e2e", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestInspector completes the demo `deploy` tool in the MCP Inspector 2.12.0's web UI, in
// Debian's headless chromium (inspector/drive.mjs, playwright-core), for each target
// (`mrtr serve`, and `mrtr proxy` in front of another `mrtr serve`; a new target is one line
// in the table) and each protocol era:
//
//   - modern (2026-07-28): the Elicitation Request dialog shows the Inspector's MRTR note,
//     approve + Submit gives "deployed api to staging", and the Protocol tab shows exactly
//     one MRTR conversation of 2 rounds (input required, then complete).
//   - legacy (2025-11-25): the same dialog (no MRTR note: the server asks with a
//     server-to-client elicitation/create on the session), the same result, no MRTR group.
//
// A screenshot of each finished call is kept as inspector-TARGET-ERA.png in the artifacts
// directory (inspector-TARGET-ERA-failed.png when a step fails).
func TestInspector(t *testing.T) {
	needInspector(t)
	artifacts := inspectorArtifacts(t)
	targets := []struct {
		name  string
		start func(t *testing.T) string // the MCP endpoint's URL, stopped at t's cleanup
	}{
		{"serve", func(t *testing.T) string { return startServe(t) }},
		{"proxy", func(t *testing.T) string { return startProxied(t, startServe(t)) }},
	}
	for _, target := range targets {
		t.Run(target.name, func(t *testing.T) {
			url := target.start(t)
			for _, era := range []string{"modern", "legacy"} {
				t.Run(era, func(t *testing.T) {
					runInspectorDriver(t, url, target.name, era, "deploy", artifacts)
				})
			}
		})
	}
}

// TestBridgeInspector: the MCP Inspector 2.12.0 in its modern era (2026-07-28) completes
// server-everything's trigger-elicitation-request through `mrtr proxy -- node ... stdio`
// (drive.mjs --flow everything-elicitation): the dialog shows the Inspector's MRTR note, the
// result carries the name and the box ticked in the form, the Protocol tab shows one MRTR
// conversation of 2 rounds, and the round was sealed (every requestState the Inspector was
// sent is an mrtr token; the proxy counted the pause). Screenshot: inspector-bridge-modern.png.
func TestBridgeInspector(t *testing.T) {
	needInspector(t)
	b := startBridgedEverything(t)
	runInspectorDriver(t, b.url, "bridge", "modern", "everything-elicitation", inspectorArtifacts(t))
	b.wantSealed(t, 1)
}

// runInspectorDriver runs inspector/drive.mjs --flow flow with the pinned Node 22 and fails t
// unless it completes the flow and leaves its screenshot. At the deadline the driver gets SIGTERM (it
// keeps a failure screenshot, then stops the Inspector and the browser it started), and
// SIGKILL 15 s later. The driver runs in its own process group, which holds the Inspector;
// whatever is left in that group after the driver exits is killed by the group's id.
// (Chromium runs in a group of its own, made by playwright-core, and exits when the
// driver's end of its DevTools pipe closes.)
func runInspectorDriver(t *testing.T, url, target, era, flow, artifacts string) {
	t.Helper()
	dir := filepath.Join(repoRoot, "inspector")
	ctx, cancel := context.WithTimeout(context.Background(), inspectorRunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "node"), filepath.Join(dir, "drive.mjs"),
		"--server-url", url, "--era", era, "--flow", flow, "--name", target, "--out", artifacts, "--timeout", inspectorDriverSecs)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	// Own process group, so that everything the driver starts can be stopped by its id;
	// SIGTERM to the driver if this test binary dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start).Round(100 * time.Millisecond)
	if cmd.Process != nil {
		// Normally the driver has stopped all it started; anything left in its group goes now.
		if syscall.Kill(-cmd.Process.Pid, 0) == nil {
			t.Logf("processes left in the driver's group (pgid %d); killing them", cmd.Process.Pid)
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	output := out.String()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("Inspector driver (%s, %s era) did not finish within %v; stopped. Output:\n%s", target, era, inspectorRunTimeout, tail(output, 60))
	case errors.As(err, &exit):
		t.Fatalf("Inspector driver (%s, %s era) failed (exit %d) after %v. Output:\n%s", target, era, exit.ExitCode(), took, tail(output, 60))
	case errors.Is(err, exec.ErrWaitDelay):
		t.Logf("Inspector driver (%s, %s era) exited but something it started kept its output open %v longer", target, era, cmd.WaitDelay)
	case err != nil:
		t.Fatalf("Inspector driver (%s, %s era): %v\n%s", target, era, err, tail(output, 60))
	}

	okLine := ""
	for _, line := range strings.Split(output, "\n") {
		if strings.HasPrefix(line, "drive: OK ") {
			okLine = line
		}
	}
	if okLine == "" {
		t.Fatalf("Inspector driver (%s, %s era) exited 0 without its \"drive: OK\" line. Output:\n%s", target, era, tail(output, 60))
	}
	shot := filepath.Join(artifacts, "inspector-"+target+"-"+era+".png")
	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("the driver reported success but left no screenshot: %v", err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 10_000 {
		t.Fatalf("%s is not a screenshot of a page (%d bytes)", shot, len(png))
	}
	t.Logf("%s (run took %v)", okLine, took)
}
