package bridge

import (
	"log/slog"
	"sync"
	"time"
)

// warnEvery is the least time between two warnings of one kind.
const warnEvery = 5 * time.Second

// warnings writes warnings of one kind at most once every warnEvery,
// each with the count of those left out since the last ("suppressed").
// It is safe for concurrent use.
type warnings struct {
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex
	last    map[string]time.Time
	quiet   map[string]int
	refused Refusals
}

// The limits a call can be refused at, as warnings name their kind.
const (
	limitProcs     = "--max-procs"
	limitPerCaller = "--max-procs-per-caller"
	limitHolds     = "--max-holds"
)

// Refusals counts the calls (and 2025-11-25 client sessions) refused at
// each limit since the start.
type Refusals struct {
	// Procs counts those refused at --max-procs (Options.MaxSessions).
	Procs int64
	// PerCaller counts those refused at --max-procs-per-caller
	// (Options.MaxSessionsPerCaller).
	PerCaller int64
	// Holds counts those refused at --max-holds (Options.MaxHolds).
	Holds int64
}

// refuse counts a refusal at limit (one of the limit* names) and warns of
// it as warn does, kind the limit.
func (w *warnings) refuse(limit, msg string, args ...any) {
	w.mu.Lock()
	switch limit {
	case limitProcs:
		w.refused.Procs++
	case limitPerCaller:
		w.refused.PerCaller++
	case limitHolds:
		w.refused.Holds++
	}
	w.mu.Unlock()
	w.warn(limit, msg, append([]any{"limit", limit}, args...)...)
}

// refusals returns the refusals counted so far.
func (w *warnings) refusals() Refusals {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.refused
}

func newWarnings(log *slog.Logger, now func() time.Time) *warnings {
	return &warnings{log: log, now: now, last: map[string]time.Time{}, quiet: map[string]int{}}
}

// warn logs msg with args unless a warning of kind was logged less than
// warnEvery ago.
func (w *warnings) warn(kind, msg string, args ...any) {
	now := w.now()
	w.mu.Lock()
	if t, ok := w.last[kind]; ok && now.Sub(t) < warnEvery && now.Sub(t) >= 0 {
		w.quiet[kind]++
		w.mu.Unlock()
		return
	}
	n := w.quiet[kind]
	w.last[kind] = now
	delete(w.quiet, kind)
	w.mu.Unlock()
	w.log.Warn(msg, append(args, "suppressed", n)...)
}
