package probe

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// wantVerdicts checks the verdicts of the checks named in pairs
// ("name=verdict"); the others are not looked at.
func wantVerdicts(t *testing.T, rep *Report, pairs ...string) {
	t.Helper()
	for _, p := range pairs {
		n, v, _ := strings.Cut(p, "=")
		if c := rep.Get(n); c.Verdict != Verdict(v) {
			t.Errorf("%s: %s, want %s (%s)", n, c.Verdict, v, c.Detail)
		}
	}
}

// TestRunTwoPausableTools: with exactly two pausable tools (and no
// prompt or resource), moved moves a state between them both ways; a
// server binding its states to tool and arguments passes every
// essential check, and the run is complete.
func TestRunTwoPausableTools(t *testing.T) {
	rep := runFake(t, &fakeServer{tools: sealed("deploy", "audit")}, nil)
	wantVerdicts(t, rep, "readable=pass", "tampered=pass", "moved=pass", "arguments_changed=pass", "replayed=pass",
		"oversized=pass", "not_a_string=pass", "error_shape=pass")
	if d := rep.Get(CheckMoved).Detail; !strings.Contains(d, "state of deploy sent to audit: refused") || !strings.Contains(d, "state of audit sent to deploy: refused") {
		t.Errorf("moved: %s", d)
	}
	if rep.Tool != "deploy" || !slices.Equal(rep.Others, []string{"audit"}) || len(rep.Incomplete) != 0 || rep.Unchecked != "" {
		t.Errorf("tool %s, others %v, incomplete %v, unchecked %q", rep.Tool, rep.Others, rep.Incomplete, rep.Unchecked)
	}
}

// TestRunStrayPause pins issue 27 item 12: a tool that pauses once (on
// a stray roots/list) and then never again is not chosen; alone, it
// leaves nothing to check, said once; named with --tool, it is an error.
func TestRunStrayPause(t *testing.T) {
	stray := &fakeTool{name: "long-running", pauses: 1, stray: true}
	rep := runFake(t, &fakeServer{tools: []*fakeTool{stray, {name: "deploy", pauses: -1}}}, nil)
	if rep.Tool != "deploy" || len(rep.Others) != 0 {
		t.Errorf("tool %s (others %v), want deploy", rep.Tool, rep.Others)
	}
	wantVerdicts(t, rep, "tampered=pass", "arguments_changed=pass", "moved=skip")

	stray = &fakeTool{name: "long-running", pauses: 1, stray: true}
	rep = runFake(t, &fakeServer{tools: []*fakeTool{stray}}, nil)
	if !strings.Contains(rep.Unchecked, "no tool paused twice the same way") || rep.Tool != "" {
		t.Errorf("unchecked %q, tool %q", rep.Unchecked, rep.Tool)
	}
	// It says why the last tool tried was not taken (a second pause
	// refused at a server's limit reads here, not as silence).
	if !strings.Contains(rep.Unchecked, "the last tried: long-running paused once") {
		t.Errorf("unchecked %q does not say why long-running was not taken", rep.Unchecked)
	}
	for _, c := range rep.Checks {
		if c.Verdict != Skip || strings.Contains(c.Detail, "no tool paused") {
			t.Errorf("%s: %s (%s), want a skip pointing to unchecked", c.Name, c.Verdict, c.Detail)
		}
	}

	stray = &fakeTool{name: "long-running", pauses: 1, stray: true}
	f := &fakeServer{tools: []*fakeTool{stray}}
	_, err := Run(t.Context(), &HTTPTarget{URL: f.start(t)}, &Options{Tool: "long-running"})
	if err == nil || !strings.Contains(err.Error(), "tool long-running paused once (input_required [roots]) but not again the same way") {
		t.Errorf("--tool long-running: %v", err)
	}
}

// TestRunIncomplete pins issue 27 item 12: an essential check skipped for
// a reason other than a flag not given makes the run incomplete; moved
// skipped for --tool without --other-tool does not; and with --other-tool
// given, a moved that could not run does not blame a missing flag.
func TestRunIncomplete(t *testing.T) {
	rep := runFake(t, &fakeServer{tools: sealed("deploy")}, nil)
	if !slices.Equal(rep.Incomplete, []string{CheckMoved}) || !strings.Contains(rep.Get(CheckMoved).Detail, "only one tool paused") {
		t.Errorf("one pausable tool: incomplete %v (moved: %s)", rep.Incomplete, rep.Get(CheckMoved).Detail)
	}
	rep = runFake(t, &fakeServer{tools: sealed("deploy", "audit")}, &Options{Tool: "deploy"})
	if len(rep.Incomplete) != 0 || !strings.Contains(rep.Get(CheckMoved).Detail, "--tool without --other-tool") {
		t.Errorf("--tool alone: incomplete %v (moved: %s)", rep.Incomplete, rep.Get(CheckMoved).Detail)
	}
	// deploy pauses for discovery (2) and tampered (one per variant),
	// audit for discovery only: neither pauses again for moved.
	f := &fakeServer{tools: []*fakeTool{{name: "deploy", pauses: 2 + len(Variants)}, {name: "audit", pauses: 2}}}
	rep = runFake(t, f, &Options{Tool: "deploy", OtherTool: "audit"})
	d := rep.Get(CheckMoved).Detail
	if rep.Get(CheckMoved).Verdict != Skip || strings.Contains(d, "--other-tool") || !strings.Contains(d, "deploy did not pause again") {
		t.Errorf("--tool and --other-tool: moved %s: %s", rep.Get(CheckMoved).Verdict, d)
	}
	if !slices.Equal(rep.Incomplete, []string{CheckMoved, CheckArgumentsChanged}) {
		t.Errorf("incomplete %v, want moved and arguments_changed", rep.Incomplete)
	}
}

// TestRunLegacy: a 2025-11-25 server leaves nothing to check, said once.
func TestRunLegacy(t *testing.T) {
	rep := runFake(t, &fakeServer{legacy: true}, nil)
	if rep.Era != LegacyVersion || !strings.Contains(rep.Unchecked, "the server speaks 2025-11-25") || len(rep.Incomplete) != 0 {
		t.Errorf("era %s, unchecked %q, incomplete %v", rep.Era, rep.Unchecked, rep.Incomplete)
	}
}

// TestRunErrorShapeID: a refusal whose error carries another id than the
// request's, or null, fails error_shape.
func TestRunErrorShapeID(t *testing.T) {
	for _, id := range []string{"999", "null"} {
		rep := runFake(t, &fakeServer{tools: sealed("deploy", "audit"), refuse: fakeRefusal{id: id}}, nil)
		c := rep.Get(CheckErrorShape)
		if c.Verdict != Fail || !strings.Contains(c.Detail, "tampered: error with id "+id+", not ") {
			t.Errorf("id %s: error_shape %s (%s)", id, c.Verdict, c.Detail)
		}
	}
}

// TestRunServerError: HTTP 500 (the least 5xx) is a server error, not a
// refusal: with a JSON-RPC error, oversized and error_shape fail; with no
// body, error_shape fails.
func TestRunServerError(t *testing.T) {
	rep := runFake(t, &fakeServer{tools: sealed("deploy", "audit"), refuse: fakeRefusal{status: 500}}, nil)
	for _, n := range []string{CheckOversized, CheckErrorShape} {
		if c := rep.Get(n); c.Verdict != Fail || !strings.Contains(c.Detail, "HTTP 500: a server error, not a refusal") {
			t.Errorf("HTTP 500 with an error: %s %s (%s)", n, c.Verdict, c.Detail)
		}
	}
	rep = runFake(t, &fakeServer{tools: sealed("deploy", "audit"), refuse: fakeRefusal{status: 500, noBody: true}}, nil)
	if c := rep.Get(CheckErrorShape); c.Verdict != Fail || !strings.Contains(c.Detail, "HTTP 500 without a JSON-RPC error") {
		t.Errorf("HTTP 500 alone: error_shape %s (%s)", c.Verdict, c.Detail)
	}
}

// TestRunTimeoutNotRefused: a server that never answers an altered
// state has not refused it: tampered is inconclusive (warn, the run
// incomplete), not pass; oversized fails.
func TestRunTimeoutNotRefused(t *testing.T) {
	rep := runFake(t, &fakeServer{tools: sealed("deploy", "audit"), refuse: fakeRefusal{hang: true}}, &Options{Timeout: 300 * time.Millisecond})
	wantVerdicts(t, rep, "tampered=warn", "moved=warn", "arguments_changed=warn", "oversized=fail")
	if d := rep.Get(CheckTampered).Detail; !strings.Contains(d, "middle flip: inconclusive (no answer (no answer within 300ms))") ||
		!strings.Contains(d, "(inconclusive: no answer, so nothing says whether the state was refused)") || strings.Contains(d, "starts over") {
		t.Errorf("tampered: %s", d)
	}
	if !slices.Equal(rep.Incomplete, Essential) {
		t.Errorf("incomplete %v", rep.Incomplete)
	}
	if c := rep.Get(CheckErrorShape); c.Verdict != Skip {
		t.Errorf("error_shape %s (%s): no answer is no refusal to judge", c.Verdict, c.Detail)
	}
}

// TestRunReasonKept: the server's data.reason reaches the report as
// sent; cleaning it is for the printer (mrtr probe), --json keeps it.
func TestRunReasonKept(t *testing.T) {
	rep := runFake(t, &fakeServer{tools: sealed("deploy", "audit"), refuse: fakeRefusal{reason: "bad\x1b[2J"}}, nil)
	if d := rep.Get(CheckTampered).Detail; !strings.Contains(d, "(bad\x1b[2J)") {
		t.Errorf("tampered: %q", d)
	}
}

// TestRunEndsWhatItPaused pins issue 28 item 7: every flow the probe
// pauses (discovery's, each check's, the other caller's, a flow of two
// rounds) is ended by the end of the run with an honest resume that
// declines, so a server that holds something per paused call (a bridging
// proxy's child) holds nothing; the verdicts are those of a run that
// ends nothing, and the requests that ended the flows are counted apart.
func TestRunEndsWhatItPaused(t *testing.T) {
	for _, rounds := range []int{1, 2} {
		f := &fakeServer{tools: []*fakeTool{{name: "deploy", pauses: -1, rounds: rounds}, {name: "audit", pauses: -1}}}
		target := &HTTPTarget{URL: f.start(t), Bearer: "first", BearerOther: "second"}
		rep, err := Run(t.Context(), target, &Options{Wait: time.Hour, Sleep: func(context.Context, time.Duration) error { return nil }})
		if err != nil {
			t.Fatalf("rounds %d: Run: %v", rounds, err)
		}
		wantVerdicts(t, rep, "tampered=pass", "moved=pass", "arguments_changed=pass", "replayed=pass", "another_caller=pass", "error_shape=pass")
		paused, ended, held := f.held()
		if held != 0 || ended != paused || paused == 0 {
			t.Errorf("rounds %d: %d flows paused, %d ended, %d still held", rounds, paused, ended, held)
		}
		f.mu.Lock()
		hits, declined := f.hits, f.declined
		f.mu.Unlock()
		if rep.Requests+rep.Cleanup != hits || rep.Cleanup == 0 || declined < rep.Cleanup {
			t.Errorf("rounds %d: %d requests and %d to end the flows, the server got %d (%d declining resumes)", rounds, rep.Requests, rep.Cleanup, hits, declined)
		}
	}
}
