package observe

import (
	"context"
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mrtr-go/mrtr"
)

// Metrics is an mrtr.Observer that counts what a guard does, in
// Prometheus form. It is safe for concurrent use.
//
// Metrics (all prefixed mrtr_):
//
//	pauses_total{key_id}                   pauses sealed, by the key that sealed them
//	resumes_total{outcome}                 resumes decided: ok, invalid, expired, replayed,
//	                                       rounds_exceeded, arguments_changed, invalid_arguments,
//	                                       store_unavailable, audit_unavailable
//	store_calls_total{op,outcome}          single-use store calls: reserve, commit, release;
//	                                       ok, replayed, timeout, error
//	store_call_duration_seconds{op}        their latency (histogram)
//	round_depth                            the round each pause sealed (histogram; 1 = a flow's first pause)
//	token_size_bytes                       the size of each requestState sealed (histogram)
//	key_seals_total{key_id}                AES-GCM seals under each key by this process since it started
//	                                       (its share of the key's 2^32 random-nonce budget)
//
// Every label value comes from a bounded set: an outcome, operation or
// store outcome that is not one of those listed counts as "other".
type Metrics struct {
	mrtr.NopObserver
	pauses     *prometheus.CounterVec
	resumes    *prometheus.CounterVec
	storeCalls *prometheus.CounterVec
	storeTime  *prometheus.HistogramVec
	rounds     prometheus.Histogram
	tokenSize  prometheus.Histogram
	seals      *prometheus.CounterVec
	tasks      *taskMetrics // tasks.go

	// The children of fixed label values, looked up once.
	resumeBy map[mrtr.Outcome]prometheus.Counter
	storeBy  map[storeKey]prometheus.Counter
	timeBy   map[mrtr.StoreOp]prometheus.Observer
}

type storeKey struct {
	op      mrtr.StoreOp
	outcome mrtr.StoreOutcome
}

// otherLabel is the label value of an outcome or operation not in the
// fixed sets below, so that no label takes an unbounded set of values.
const otherLabel = "other"

// ResumeOutcomes are the values of mrtr_resumes_total's outcome label,
// every one exported from the start at 0.
var resumeOutcomes = []mrtr.Outcome{
	mrtr.OutcomeOK,
	mrtr.Outcome(mrtr.ReasonInvalid),
	mrtr.Outcome(mrtr.ReasonExpired),
	mrtr.Outcome(mrtr.ReasonReplayed),
	mrtr.Outcome(mrtr.ReasonRoundsExceeded),
	mrtr.Outcome(mrtr.ReasonArgumentsChanged),
	mrtr.OutcomeInvalidArguments,
	mrtr.OutcomeStoreUnavailable,
	mrtr.OutcomeAuditUnavailable,
}

var (
	storeOps      = []mrtr.StoreOp{mrtr.StoreReserve, mrtr.StoreCommit, mrtr.StoreRelease}
	storeOutcomes = []mrtr.StoreOutcome{mrtr.StoreOK, mrtr.StoreReplayed, mrtr.StoreTimeout, mrtr.StoreError}
)

// NewMetrics registers the metrics with reg (never the global registry
// unless that is what reg is) and returns the Observer that feeds them.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		pauses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mrtr_pauses_total",
			Help: "Pauses sealed (requestStates issued), by the id of the key that sealed them.",
		}, []string{"key_id"}),
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mrtr_resumes_total",
			Help: "Calls that carried a requestState, by outcome: ok, a rejection reason (invalid, expired, replayed, rounds_exceeded, arguments_changed), invalid_arguments (not I-JSON), store_unavailable or audit_unavailable (--audit-required).",
		}, []string{"outcome"}),
		storeCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mrtr_store_calls_total",
			Help: "Calls to the single-use store, by operation (reserve, commit, release) and outcome (ok, replayed, timeout, error).",
		}, []string{"op", "outcome"}),
		storeTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mrtr_store_call_duration_seconds",
			Help:    "Latency of calls to the single-use store, by operation, in seconds.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"op"}),
		rounds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mrtr_round_depth",
			Help:    "The round each pause sealed: 1 for a flow's first pause, n for its nth.",
			Buckets: prometheus.LinearBuckets(1, 1, 10),
		}),
		tokenSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mrtr_token_size_bytes",
			Help:    "Size of each requestState sealed, in bytes.",
			Buckets: prometheus.ExponentialBuckets(128, 2, 10), // 128 B to 64 KiB, the default token cap
		}),
		seals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mrtr_key_seals_total",
			Help: "AES-GCM seals under each key by this process since it started; a key's random-nonce budget (2^32 seals) is shared by every node that seals with it.",
		}, []string{"key_id"}),
	}
	tm, tcs := newTaskMetrics()
	m.tasks = tm
	for _, c := range append([]prometheus.Collector{m.pauses, m.resumes, m.storeCalls, m.storeTime, m.rounds, m.tokenSize, m.seals}, tcs...) {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register mrtr metrics: %w", err)
		}
	}
	m.resumeBy = make(map[mrtr.Outcome]prometheus.Counter, len(resumeOutcomes))
	for _, o := range resumeOutcomes {
		m.resumeBy[o] = m.resumes.WithLabelValues(string(o))
	}
	m.storeBy = make(map[storeKey]prometheus.Counter, len(storeOps)*len(storeOutcomes))
	m.timeBy = make(map[mrtr.StoreOp]prometheus.Observer, len(storeOps))
	for _, op := range storeOps {
		m.timeBy[op] = m.storeTime.WithLabelValues(string(op))
		for _, o := range storeOutcomes {
			m.storeBy[storeKey{op, o}] = m.storeCalls.WithLabelValues(string(op), string(o))
		}
	}
	return m, nil
}

// bounded returns v as a label value when it is one of known, and
// otherLabel when it is not.
func bounded[T ~string](v T, known []T) string {
	if slices.Contains(known, v) {
		return string(v)
	}
	return otherLabel
}

// Resumed counts a resume by outcome.
func (m *Metrics) Resumed(_ context.Context, e mrtr.ResumeEvent) {
	if c, ok := m.resumeBy[e.Outcome]; ok {
		c.Inc()
		return
	}
	m.resumes.WithLabelValues(otherLabel).Inc()
}

// Paused counts a pause and its seal by key id, its round and its size.
func (m *Metrics) Paused(_ context.Context, e mrtr.PauseEvent) {
	kid := e.KeyID
	if kid == "" {
		kid = "unknown" // a codec whose tokens do not name their key
	}
	m.pauses.WithLabelValues(kid).Inc()
	m.seals.WithLabelValues(kid).Inc()
	m.rounds.Observe(float64(e.Round))
	m.tokenSize.Observe(float64(e.TokenBytes))
}

// StoreCalled counts a store call and records its latency.
func (m *Metrics) StoreCalled(_ context.Context, e mrtr.StoreEvent) {
	if c, ok := m.storeBy[storeKey{e.Op, e.Outcome}]; ok {
		c.Inc()
	} else {
		m.storeCalls.WithLabelValues(bounded(e.Op, storeOps), bounded(e.Outcome, storeOutcomes)).Inc()
	}
	if h, ok := m.timeBy[e.Op]; ok {
		h.Observe(e.Duration.Seconds())
	} else {
		m.storeTime.WithLabelValues(otherLabel).Observe(e.Duration.Seconds())
	}
}
