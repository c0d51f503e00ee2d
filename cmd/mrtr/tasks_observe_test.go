package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/audit"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/internal/testing/adaptertest"
	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
)

// TestServeTaskMetricsAndAudit pins issue 38 item 6 on `mrtr serve
// --metrics-addr --audit`: a task with an input round (confirm_delete),
// a caller's tasks/get without the extension, an unknown task id and a
// cancelled task (slow_compute) reach /metrics and the trail, which
// verifies and holds no task id, argument value or answer content.
func TestServeTaskMetricsAndAudit(t *testing.T) {
	dir := t.TempDir()
	keys, trail := filepath.Join(dir, "keys.json"), filepath.Join(dir, "audit.jsonl")
	key := testcmd.GenKey(t, "k1")
	testcmd.WriteRing(t, keys, key)
	url, logs := startServe(t, "--keys", keys, "--metrics-addr", "127.0.0.1:0", "--audit", trail)
	metricsURL := testcmd.LogURL(t, logs, "mrtr metrics serving")

	const secretArg, secretAnswer = "zq-task-argument", "zq-task-answer"
	c := adaptertest.TaskClient(url, "", true)
	d := adaptertest.MustTask(t, c.Call(t, "tools/call", map[string]any{"name": "confirm_delete", "arguments": map[string]any{"filename": secretArg}}))
	id := d.TaskID
	adaptertest.WaitTask(t, url, "", id, task.InputRequired)
	waitLine(t, trail, "task_input") // written just after the store shows it
	adaptertest.TaskClient(url, "", false).Call(t, task.MethodGet, map[string]any{"taskId": id})
	c.Call(t, task.MethodGet, map[string]any{"taskId": "no-such-task"})
	c.Call(t, task.MethodUpdate, map[string]any{"taskId": id, "inputResponses": map[string]any{
		"confirm": map[string]any{"action": "accept", "content": map[string]any{"confirm": true, "note": secretAnswer}}}})
	adaptertest.WaitTask(t, url, "", id, task.Completed)
	waitLine(t, trail, "task_completed") // the same
	slow := adaptertest.MustTask(t, c.Call(t, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 30}})).TaskID
	c.Call(t, task.MethodCancel, map[string]any{"taskId": slow})

	want := map[string]float64{
		"mrtr_tasks_created_total":                               2,
		"mrtr_task_inputs_total":                                 1,
		`mrtr_task_answers_total{action="accept"}`:               1,
		`mrtr_tasks_ended_total{outcome="complete"}`:             1,
		`mrtr_tasks_ended_total{outcome="cancelled"}`:            1,
		`mrtr_task_rejections_total{reason="unknown_task"}`:      1,
		`mrtr_task_rejections_total{reason="missing_extension"}`: 1,
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		m, _ := scrape(t, metricsURL)
		bad := ""
		for k, v := range want {
			if m[k] != v {
				bad += k + " "
			}
		}
		if bad == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics off: %s\n%v", bad, m)
		}
		time.Sleep(20 * time.Millisecond)
	}

	raw, err := os.ReadFile(trail)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := reqstate.NewKeyRing(key)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := audit.Verify(bytes.NewReader(raw), ring, nil); err != nil || res.Lines == 0 {
		t.Fatalf("Verify: %+v, %v", res, err)
	}
	for _, s := range []string{id, slow, secretArg, secretAnswer} {
		if bytes.Contains(raw, []byte(s)) {
			t.Fatalf("the trail holds %q:\n%s", s, raw)
		}
	}
	var got []string
	for _, e := range strings.Split(events(readTrail(t, trail)), ",") {
		if strings.HasPrefix(e, "task_") || strings.HasPrefix(e, "rejected") {
			got = append(got, e)
		}
	}
	wantEvents := []string{"task_created", "task_input", "rejected:missing_extension", "rejected:unknown_task", "task_updated",
		"task_completed", "task_created", "task_cancelled"}
	if len(got) > 5 && got[4] == "task_completed" {
		got[4], got[5] = got[5], got[4] // the work took the answer before the update's line
	}
	if !slices.Equal(got, wantEvents) {
		t.Fatalf("events %v, want %v", got, wantEvents)
	}
}

// waitLine waits until the trail holds a line of event.
func waitLine(t *testing.T, trail, event string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(trail); bytes.Contains(b, []byte(`"event":"`+event+`"`)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s line", event)
		}
	}
}
