package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The harness's exit code alone cannot tell a run that checked everything
// from one that checked nothing: a scenario the harness no longer finds, a
// suite that selects fewer scenarios, or a results directory that stayed
// empty all exit 0. So each suite run is also held to the scenarios it
// must have run and, for each, the least number of checks that must have
// passed (SUCCESS). The numbers are those of the pinned harness
// (conformance/package.json, @modelcontextprotocol/conformance
// 0.2.0-alpha.12) against `mrtr serve`; re-pin them after a harness bump
// from the per-scenario lines the test logs.

// mrtrScenarioChecks are the 14 input-required-result-* (SEP-2322)
// scenarios, which both the 2026-07-28 requirements and the draft suite
// run.
func mrtrScenarioChecks() map[string]int {
	return map[string]int{
		"input-required-result-basic-elicitation":       3,
		"input-required-result-basic-list-roots":        3,
		"input-required-result-basic-sampling":          3,
		"input-required-result-capability-check":        2,
		"input-required-result-ignore-extra-params":     2,
		"input-required-result-missing-input-response":  2,
		"input-required-result-multi-round":             4,
		"input-required-result-multiple-input-requests": 3,
		"input-required-result-non-tool-request":        3,
		"input-required-result-request-state":           3,
		"input-required-result-result-type":             2,
		"input-required-result-tampered-state":          2,
		"input-required-result-unsupported-methods":     2,
		"input-required-result-validate-input":          3,
	}
}

// expectedChecks returns, for a MODE of scripts/conformance-run.sh, every
// scenario that must run and the least number of its checks that must
// pass.
func expectedChecks(mode string) map[string]int {
	var want map[string]int
	switch mode {
	case "req-2026":
		// The scored scenarios, and the pending header and JSON Schema ones
		// (unscored, but passing). The unscored tasks-* extension
		// scenarios run here too; TestConformanceTasks holds each of
		// them to every check.
		want = map[string]int{
			"caching":                              8,
			"completion-complete":                  2,
			"dns-rebinding-protection":             2,
			"http-custom-header-server-validation": 10,
			"http-header-validation":               14,
			"json-schema-2020-12":                  8,
			"prompts-get-embedded-resource":        2,
			"prompts-get-simple":                   2,
			"prompts-get-with-args":                2,
			"prompts-get-with-image":               2,
			"prompts-list":                         2,
			"resources-list":                       2,
			"resources-read-binary":                2,
			"resources-read-text":                  2,
			"resources-templates-read":             2,
			"sep-2164-resource-not-found":          4,
			"server-sse-multiple-streams":          2,
			"server-stateless":                     30,
			"tools-call-audio":                     2,
			"tools-call-embedded-resource":         2,
			"tools-call-error":                     2,
			"tools-call-image":                     2,
			"tools-call-mixed-content":             2,
			"tools-call-simple-text":               2,
			"tools-call-with-progress":             2,
			"tools-list":                           4,
		}
		maps.Copy(want, mrtrScenarioChecks())
	case "draft":
		want = map[string]int{
			"caching":                              8,
			"http-custom-header-server-validation": 10,
			"http-header-validation":               14,
			"sep-2164-resource-not-found":          4,
			"server-stateless":                     30,
		}
		maps.Copy(want, mrtrScenarioChecks())
	case "req-2025":
		want = map[string]int{
			"completion-complete":           2,
			"dns-rebinding-protection":      2,
			"elicitation-sep1034-defaults":  6,
			"elicitation-sep1330-enums":     6,
			"json-schema-2020-12":           8,
			"logging-set-level":             2,
			"ping":                          2,
			"prompts-get-embedded-resource": 2,
			"prompts-get-simple":            2,
			"prompts-get-with-args":         2,
			"prompts-get-with-image":        2,
			"prompts-list":                  2,
			"resources-list":                2,
			"resources-read-binary":         2,
			"resources-read-text":           2,
			"resources-subscribe":           2,
			"resources-templates-read":      2,
			"resources-unsubscribe":         2,
			"server-initialize":             3,
			"server-session-lifecycle":      3,
			"server-sse-multiple-streams":   2,
			"server-sse-polling":            3, // and 7 INFO
			"tools-call-audio":              2,
			"tools-call-elicitation":        2,
			"tools-call-embedded-resource":  2,
			"tools-call-error":              2,
			"tools-call-image":              2,
			"tools-call-mixed-content":      2,
			"tools-call-sampling":           2,
			"tools-call-simple-text":        2,
			"tools-call-with-logging":       2,
			"tools-call-with-progress":      2,
			"tools-list":                    3,
		}
	case "req-2025-stdio":
		// go-sdk's everything-server over stdio behind `mrtr proxy --`,
		// one child per session: as `mrtr serve`, but for the two SSE
		// scenarios (what the same server behind the proxy over HTTP
		// passes: 82 checks, multiple-streams 2, polling 1 and a WARNING).
		// A response comes as JSON unless the child sends something
		// before it, so the three concurrent tools/list answers are JSON
		// (INFO: "SSE streams optional") and the polling scenario stops at
		// "Server returned JSON" (INFO only); there are no event ids to
		// resume from.
		want = expectedChecks("req-2025")
		want["server-sse-multiple-streams"] = 1
		want["server-sse-polling"] = 0
	default:
		panic("expectedChecks: no pinned counts for mode " + mode)
	}
	return want
}

// resultDir is the name of one scenario's result directory:
// [server-]<scenario>-<ISO timestamp with : and . as ->.
var resultDir = regexp.MustCompile(`^(?:server-)?(.*?)-\d{4}-\d{2}-\d{2}T[\d-]+Z?$`)

// scenarioResults reads the checks.json files the harness wrote under dir
// and returns, per scenario, how many of its checks ended in each status
// (SUCCESS, FAILURE, WARNING, INFO, SKIPPED).
func scenarioResults(dir string) (map[string]map[string]int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*", "checks.json"))
	if err != nil {
		return nil, err
	}
	results := map[string]map[string]int{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var checks []struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(data, &checks); err != nil {
			return nil, fmt.Errorf("read %s: %w", f, err)
		}
		name := filepath.Base(filepath.Dir(f))
		if m := resultDir.FindStringSubmatch(name); m != nil {
			name = m[1]
		}
		if results[name] == nil {
			results[name] = map[string]int{}
		}
		for _, c := range checks {
			results[name][c.Status]++
		}
	}
	return results, nil
}

// shortfalls compares a run's results with the pinned minimums and returns
// one line for each pinned scenario that did not run or passed fewer
// checks than pinned, sorted by scenario.
func shortfalls(got map[string]map[string]int, want map[string]int) []string {
	var short []string
	for _, name := range slices.Sorted(maps.Keys(want)) {
		counts, ran := got[name]
		switch {
		case !ran:
			short = append(short, fmt.Sprintf("%s: did not run (want at least %d passing checks)", name, want[name]))
		case counts["SUCCESS"] < want[name]:
			short = append(short, fmt.Sprintf("%s: %d checks passed, want at least %d (%s)", name, counts["SUCCESS"], want[name], statusList(counts)))
		}
	}
	return short
}

// statusList formats status counts as "3 SUCCESS, 1 WARNING".
func statusList(counts map[string]int) string {
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
	}
	if len(parts) == 0 {
		return "no checks"
	}
	return strings.Join(parts, ", ")
}

// mustHaveRun fails t unless the run executed every scenario pinned for
// mode with at least its pinned number of passing checks. It logs one
// line per scenario, so the pins can be renewed from a log.
func (r harnessRun) mustHaveRun(t *testing.T, mode string) {
	t.Helper()
	got, err := scenarioResults(r.dir)
	if err != nil {
		t.Fatalf("conformance %s: read results: %v", mode, err)
	}
	want := expectedChecks(mode)
	passed, pinned := 0, 0
	var lines []string
	for _, name := range slices.Sorted(maps.Keys(got)) {
		passed += got[name]["SUCCESS"]
		note := ""
		if _, ok := want[name]; !ok {
			note = " (not pinned)"
		}
		lines = append(lines, fmt.Sprintf("  %s: %s%s", name, statusList(got[name]), note))
	}
	for _, n := range want {
		pinned += n
	}
	t.Logf("conformance %s: %d scenarios ran, %d checks passed (pinned: %d scenarios, at least %d checks):\n%s",
		mode, len(got), passed, len(want), pinned, strings.Join(lines, "\n"))
	if short := shortfalls(got, want); len(short) > 0 {
		t.Fatalf("conformance %s ran fewer checks than pinned for the harness in conformance/package.json "+
			"(%d of %d pinned scenarios short):\n  %s\nOutput tail:\n%s",
			mode, len(short), len(want), strings.Join(short, "\n  "), tail(r.output, 40))
	}
}

// TestShortfalls pins the counting itself on result directories written
// here: a run with no results, a missing scenario and a scenario that
// passed fewer checks are each reported; extra scenarios and extra checks
// are not.
func TestShortfalls(t *testing.T) {
	write := func(dir, entry, checks string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, entry), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, entry, "checks.json"), []byte(checks), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int{"ping": 2, "tools-list": 3}
	two := `[{"id":"a","status":"SUCCESS"},{"id":"b","status":"SUCCESS"}]`
	three := `[{"id":"a","status":"SUCCESS"},{"id":"b","status":"SUCCESS"},{"id":"c","status":"SUCCESS"},{"id":"d","status":"INFO"}]`

	for _, tt := range []struct {
		name  string
		setup func(dir string)
		short []string
	}{
		{"nothing ran", func(string) {}, []string{
			"ping: did not run (want at least 2 passing checks)",
			"tools-list: did not run (want at least 3 passing checks)"}},
		{"all ran", func(dir string) {
			write(dir, "server-ping-2026-11-30T19-47-03-123Z", two)
			write(dir, "server-tools-list-2026-11-30T19-47-04-001Z", three)
			write(dir, "server-extra-2026-11-30T19-47-05-001Z", `[]`)
		}, nil},
		{"one missing, one short", func(dir string) {
			write(dir, "server-ping-2026-11-30T19-47-03-123Z",
				`[{"id":"a","status":"SUCCESS"},{"id":"b","status":"WARNING"}]`)
			write(dir, "server-tools-lister-2026-11-30T19-47-04-001Z", three)
		}, []string{
			"ping: 1 checks passed, want at least 2 (1 SUCCESS, 1 WARNING)",
			"tools-list: did not run (want at least 3 passing checks)"}},
		{"empty checks", func(dir string) {
			write(dir, "server-ping-2026-11-30T19-47-03-123Z", `[]`)
			write(dir, "server-tools-list-2026-11-30T19-47-04-001Z", three)
		}, []string{"ping: 0 checks passed, want at least 2 (no checks)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.setup(dir)
			got, err := scenarioResults(dir)
			if err != nil {
				t.Fatal(err)
			}
			if short := shortfalls(got, want); !slices.Equal(short, tt.short) {
				t.Fatalf("shortfalls:\n  %s\nwant:\n  %s", strings.Join(short, "\n  "), strings.Join(tt.short, "\n  "))
			}
		})
	}

	// Every pinned suite covers all 14 SEP-2322 scenarios.
	for _, mode := range []string{"req-2026", "draft"} {
		want := expectedChecks(mode)
		for name := range mrtrScenarioChecks() {
			if want[name] == 0 {
				t.Errorf("%s does not pin %s", mode, name)
			}
		}
	}
	if _, err := scenarioResults(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	bad := t.TempDir()
	write(bad, "server-ping-2026-11-30T19-47-03-123Z", `{"not":"an array"}`)
	if _, err := scenarioResults(bad); err == nil {
		t.Error("an unreadable checks.json was not reported")
	}
}
