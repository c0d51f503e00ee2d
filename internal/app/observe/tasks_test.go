package observe_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mrtr-go/mrtr/internal/app/observe"
	"github.com/mrtr-go/mrtr/internal/testing/adaptertest"
)

// TestTaskMetrics pins the task metrics after a task with one input
// round, a cross-caller refusal, a gate refusal, ignored answers and a
// cancellation.
func TestTaskMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := observe.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	adaptertest.RunTaskScenario(t, m)
	want := `
# HELP mrtr_tasks_created_total Tasks created (a tools/call answered with a CreateTaskResult).
# TYPE mrtr_tasks_created_total counter
mrtr_tasks_created_total 2
# HELP mrtr_task_inputs_total Input rounds asked inside tasks (inputRequests set, status input_required).
# TYPE mrtr_task_inputs_total counter
mrtr_task_inputs_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mrtr_tasks_created_total", "mrtr_task_inputs_total"); err != nil {
		t.Error(err)
	}
	for _, c := range []struct {
		metric, label, value string
		want                 float64
	}{
		{"mrtr_task_answers_total", "action", "accept", 1},
		{"mrtr_task_answers_total", "action", "decline", 0}, // the ignored one
		{"mrtr_tasks_ended_total", "outcome", "complete", 1},
		{"mrtr_tasks_ended_total", "outcome", "cancelled", 1},
		{"mrtr_tasks_ended_total", "outcome", "error", 0},
		{"mrtr_task_rejections_total", "reason", "unknown_task", 1},
		{"mrtr_task_rejections_total", "reason", "missing_extension", 1},
		{"mrtr_task_rejections_total", "reason", "answers_ignored", 1},
	} {
		if got := gathered(t, reg, c.metric, c.label, c.value); got != c.want {
			t.Errorf("%s{%s=%q} = %v, want %v", c.metric, c.label, c.value, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(reg, "mrtr_task_duration_seconds"); n != 1 {
		t.Errorf("mrtr_task_duration_seconds: %d series, want 1 (complete)", n)
	}
}

// gathered returns the value of the counter metric{label=value}.
func gathered(t *testing.T, reg *prometheus.Registry, metric, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", metric, label, value)
	return 0
}

// TestTaskSpans pins the spans of the same scenario: the creating call,
// the input round, the update, the task's life and the cancellation, and
// the gate's refusal; none for the unknown task or the ignored answers'
// request beyond its own; and no task id in any attribute or name.
func TestTaskSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s := adaptertest.RunTaskScenario(t, observe.NewTracer(tp))
	var names []string
	for _, sp := range rec.Ended() {
		names = append(names, sp.Name())
		for _, secret := range s.Secrets {
			if strings.Contains(sp.Name(), secret) {
				t.Errorf("span %q names a secret", sp.Name())
			}
			for _, a := range sp.Attributes() {
				if strings.Contains(a.Value.Emit(), secret) {
					t.Errorf("span %q: %s holds a secret", sp.Name(), a.Key)
				}
			}
		}
		if sp.Name() == "tools/call deploy" && hasAttr(sp.Attributes(), "mrtr.task.outcome", "complete") &&
			!hasAttr(sp.Attributes(), "mrtr.task.round", "1") {
			t.Errorf("the task's span: %v", sp.Attributes())
		}
	}
	want := []string{"tools/call deploy", "tools/call deploy", "tasks/get", "tasks/update", "tasks/update", "tools/call deploy", "tools/call deploy", "tasks/cancel"}
	if !slices.Equal(names, want) {
		t.Errorf("spans %q, want %q", names, want)
	}
}

func hasAttr(attrs []attribute.KeyValue, key, value string) bool {
	for _, a := range attrs {
		if string(a.Key) == key && a.Value.Emit() == value {
			return true
		}
	}
	return false
}
