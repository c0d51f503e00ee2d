package e2e

import (
	"strings"
	"testing"
)

// TestProbeLeavesNothingHeld pins issue 28 item 7: the probe ends every
// flow it paused (an honest resume that declines), so against a bridged
// 2025-11-25 server, where each paused call holds a child process until
// its token expires, two probe runs in a row behind --max-procs 6 both
// run to the same end as one would, and neither meets the limit.
func TestProbeLeavesNothingHeld(t *testing.T) {
	t.Parallel()
	node, script := serverEverything(t)
	// --max-procs 6 gives one caller 1 process (--max-procs-per-caller's
	// default): the probe, one anonymous caller, never holds two paused
	// calls at once.
	px, _, logs := startProxyLog(t, "--max-procs", "6", "--", node, script, "stdio")
	var first *probeReport
	firstCode := 0
	for run := 1; run <= 2; run++ {
		rep, code := runProbe(t, px)
		for _, c := range rep.Checks {
			if strings.Contains(c.Detail, "at its limit") {
				t.Errorf("run %d: %s met the proxy's limit: %s", run, c.Name, c.Detail)
			}
		}
		if rep.Cleanup == 0 {
			t.Errorf("run %d: no request ended a paused flow (%d requests)", run, rep.Requests)
		}
		t.Logf("run %d: exit %d, tool %s (moved: %v), %d requests, %d more to end the paused flows", run, code, rep.Tool, rep.Others, rep.Requests, rep.Cleanup)
		if run == 1 {
			first, firstCode = rep, code
			// server-everything's elicitation tool, bridged and sealed:
			// every check the probe can run without flags passes.
			wantProbe(t, rep, code, verdicts("readable=pass", "tampered=pass", "moved=pass", "arguments_changed=pass",
				"replayed=pass", "another_caller=skip", "expired=skip", "oversized=pass", "not_a_string=pass", "error_shape=pass"))
			continue
		}
		if code != firstCode {
			t.Errorf("run 2: exit %d, run 1 exited %d", code, firstCode)
		}
		for _, c := range first.Checks {
			if v := rep.Get(c.Name).Verdict; v != c.Verdict {
				t.Errorf("run 2: %s %s, run 1 %s (%s)", c.Name, v, c.Verdict, rep.Get(c.Name).Detail)
			}
		}
	}
	if out := logs.String(); strings.Contains(out, "at its limit") || strings.Contains(out, "was refused") {
		t.Errorf("the proxy met a limit:\n%s", tail(out, 40))
	}
}
