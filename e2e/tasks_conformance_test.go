package e2e

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// tasksScenarioChecks are the ten tasks-* scenarios of the pinned harness
// (the io.modelcontextprotocol/tasks extension, SEP-2663) and how many
// checks each must pass, wire-schema-valid included. tasks-status-
// notifications has none: the harness itself skips it (its one check is
// SKIPPED, "pending subscriptions/listen rewrite").
func tasksScenarioChecks() map[string]int {
	return map[string]int{
		"tasks-lifecycle":              9,
		"tasks-capability-negotiation": 5,
		"tasks-wire-fields":            4,
		"tasks-request-state-removal":  3,
		"tasks-mrtr-input":             4,
		"tasks-request-headers":        5,
		"tasks-dispatch-and-envelope":  9,
		"tasks-status-notifications":   0,
		"tasks-required-task-error":    3,
		"tasks-mrtr-composition":       2,
	}
}

// TestConformanceTasks runs each tasks-* scenario against mrtr serve (the
// demo server's task fixtures over its memory store) and requires every
// check to pass: no FAILURE, no WARNING, nothing skipped but the one the
// harness skips itself.
func TestConformanceTasks(t *testing.T) {
	needHarness(t)
	t.Parallel()
	runTasksScenarios(t, startServe(t))
}

// TestProxyConformanceTasks runs the same ten scenarios through `mrtr
// proxy --upstream` in front of mrtr serve, with the same bar: the proxy
// seals every task id to its caller (the harness sees only sealed ids,
// polls, answers and cancels with them) and the scenarios pass as they
// do against serve.
func TestProxyConformanceTasks(t *testing.T) {
	needHarness(t)
	t.Parallel()
	serve := startServe(t)
	px := startProxied(t, serve)
	// The harness sees sealed ids only: one the proxy gave is no id of
	// serve's, and serve's own never reaches the caller.
	id := startTask(t, px)
	if !strings.HasPrefix(id, "t1.") {
		t.Fatalf("the proxy gave task id %q, want a sealed t1. id", id)
	}
	if msg := taskGet(t, serve, id); msg["error"] == nil {
		t.Fatalf("serve knows the proxy's task id %q: %v", id, msg)
	}
	if res, _ := taskGet(t, px, id)["result"].(map[string]any); res["taskId"] != id {
		t.Fatalf("tasks/get through the proxy: %v, want taskId %q", res, id)
	}
	// An id that does not open is answered as serve answers one it does
	// not know.
	forged := id[:len(id)-1] + "A"
	if forged == id {
		forged = id[:len(id)-1] + "B"
	}
	if got, want := taskGet(t, px, forged)["error"], taskGet(t, serve, "no-such-task")["error"]; want == nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("a forged id through the proxy: error %v; serve answers an unknown id with %v", got, want)
	}
	runTasksScenarios(t, px)
}

// TestProxyTasksAcrossReplicas: two `mrtr proxy` processes given one key
// ring, in front of one mrtr serve, serve each other's tasks with the same
// id (nothing of a task is kept where it was created); a proxy with another
// ring answers that id as an unknown task.
func TestProxyTasksAcrossReplicas(t *testing.T) {
	t.Parallel()
	serve := startServe(t)
	ring := mnKeyRing(t, "k1")
	a := startProxied(t, serve, "--keys", ring)
	b := startProxied(t, serve, "--keys", ring)
	other := startProxied(t, serve, "--keys", mnKeyRing(t, "k1"))
	id := startTask(t, a)
	for _, px := range []string{b, a, b} {
		if res, _ := taskGet(t, px, id)["result"].(map[string]any); res["taskId"] != id {
			t.Fatalf("tasks/get on a replica: %v, want taskId %q", res, id)
		}
	}
	if msg := taskGet(t, other, id); msg["error"] == nil {
		t.Fatalf("a proxy with another ring opened the task id: %v", msg)
	}
}

// tasksRequest posts one 2026-07-28 request declaring the tasks
// extension (rawRPC) and returns its final message.
func tasksRequest(t *testing.T, url, method, name string, params map[string]any) map[string]any {
	t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
	}
	return rawRPC(t, url, method, name, params)
}

// startTask starts slow_compute as a task at url and returns its task id.
func startTask(t *testing.T, url string) string {
	t.Helper()
	msg := tasksRequest(t, url, "tools/call", "slow_compute", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 0}})
	res, _ := msg["result"].(map[string]any)
	id, _ := res["taskId"].(string)
	if id == "" {
		t.Fatalf("slow_compute: want a CreateTaskResult, got %v", msg)
	}
	return id
}

// taskGet sends tasks/get for id to url and returns the answer.
func taskGet(t *testing.T, url, id string) map[string]any {
	t.Helper()
	return tasksRequest(t, url, "tasks/get", id, map[string]any{"taskId": id})
}

// runTasksScenarios runs every tasks-* scenario against url and requires
// every check to pass: no FAILURE, no WARNING, nothing skipped but the
// one the harness skips itself.
func runTasksScenarios(t *testing.T, url string) {
	want := tasksScenarioChecks()
	for _, name := range slices.Sorted(maps.Keys(want)) {
		t.Run(name, func(t *testing.T) {
			r := runHarness(t, url, nil, "scenario", name)
			statuses := checkStatuses(t, r.dir)
			passed := 0
			for id, st := range statuses {
				switch {
				case st == "SUCCESS":
					passed++
				case st == "SKIPPED" && name == "tasks-status-notifications" && id == name:
				default:
					t.Errorf("check %s: %s", id, st)
				}
			}
			if passed < want[name] {
				t.Errorf("%d checks passed, want %d. Output tail:\n%s", passed, want[name], tail(r.output, 40))
			}
			// The script exits 3 for a run whose only check is SKIPPED.
			if r.exit != 0 && !(name == "tasks-status-notifications" && r.exit == 3) {
				t.Errorf("exit %d. Output tail:\n%s", r.exit, tail(r.output, 40))
			}
		})
	}
}
