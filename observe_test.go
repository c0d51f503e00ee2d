package mrtr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// eventLog records every event as one line, and the events themselves.
type eventLog struct {
	mu      sync.Mutex
	lines   []string
	resumes []ResumeEvent
	pauses  []PauseEvent
	stores  []StoreEvent
	ends    []EndEvent
	ctxs    []context.Context
}

func (l *eventLog) add(ctx context.Context, format string, args ...any) {
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.ctxs = append(l.ctxs, ctx)
}

func (l *eventLog) Resumed(ctx context.Context, e ResumeEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.resumes = append(l.resumes, e)
	l.add(ctx, "resume %s %s %s round=%d kid=%s", e.Method, e.Target, e.Outcome, e.Round, e.KeyID)
}

func (l *eventLog) Paused(ctx context.Context, e PauseEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pauses = append(l.pauses, e)
	l.add(ctx, "pause %s %s round=%d kid=%s", e.Method, e.Target, e.Round, e.KeyID)
}

func (l *eventLog) StoreCalled(ctx context.Context, e StoreEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stores = append(l.stores, e)
	l.add(ctx, "store %s %s", e.Op, e.Outcome)
}

func (l *eventLog) Ended(ctx context.Context, e EndEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ends = append(l.ends, e)
	l.add(ctx, "end %s %s resumed=%t round=%d paused=%t kid=%s failed=%t", e.Method, e.Target, e.Resumed, e.Round, e.Paused, e.KeyID, e.Failed)
}

func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.lines
	l.lines, l.ctxs = nil, nil
	return out
}

type ctxMark struct{}

// TestObserverEvents runs a scripted set of calls and checks every event
// the observer gets, in order: accepted resumes, each rejection reason, a
// store outage, pauses with their key id and size, store calls, ends.
func TestObserverEvents(t *testing.T) {
	log := new(eventLog)
	fx := newFixture(t, &Options{Store: useMemoryStore, MaxRounds: 2, Observer: log})
	r := deployReq()
	r.Meta = map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	ctx := context.WithValue(t.Context(), ctxMark{}, "request")
	step := func(name string, want ...string) {
		t.Helper()
		log.mu.Lock()
		for i, c := range log.ctxs {
			if c.Value(ctxMark{}) != "request" {
				t.Errorf("%s: event %d did not get the request's context", name, i)
			}
		}
		log.mu.Unlock()
		if got := log.take(); !slices.Equal(got, want) {
			t.Fatalf("%s: events\n%q\nwant\n%q", name, got, want)
		}
	}

	// A first call that pauses: no resume, one pause, one end.
	f, err := fx.g.Begin(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := f.Pause(deployCont{"api", "production"}, "confirm")
	if err != nil {
		t.Fatal(err)
	}
	f.End(ctx, nil)
	f.End(ctx, nil) // idempotent: one end event
	step("first call",
		"pause tools/call deploy round=1 kid=k1",
		"end tools/call deploy resumed=false round=0 paused=true kid=k1 failed=false")

	// The resume: accepted, reserved, committed, completed.
	f, err = fx.g.Begin(ctx, resume(r, tok, map[string]any{"confirm": "yes"}))
	if err != nil {
		t.Fatal(err)
	}
	f.End(ctx, nil)
	step("accepted resume",
		"store reserve ok",
		"resume tools/call deploy ok round=1 kid=k1",
		"store commit ok",
		"end tools/call deploy resumed=true round=1 paused=false kid= failed=false")

	// Replayed.
	_, err = fx.g.Begin(ctx, resume(r, tok, nil))
	wantReason(t, err, ReasonReplayed)
	step("replayed", "store reserve replayed", "resume tools/call deploy replayed round=0 kid=")

	// Invalid: a forged key id in the clear prefix is not reported.
	_, err = fx.g.Begin(ctx, resume(r, "v1.forged."+tok[len("v1.k1."):], nil))
	wantReason(t, err, ReasonInvalid)
	step("invalid", "resume tools/call deploy invalid round=0 kid=")

	// Arguments changed.
	tok = fx.pause(t, r)
	log.take() // fx.pause runs on the test's context
	changed := resume(r, tok, nil)
	changed.Arguments = json.RawMessage(`{"service":"db"}`)
	_, err = fx.g.Begin(ctx, changed)
	wantReason(t, err, ReasonArgumentsChanged)
	step("arguments changed", "resume tools/call deploy arguments_changed round=0 kid=")

	// Expired.
	fx.clk.Advance(DefaultTTL + DefaultLeeway + time.Second)
	_, err = fx.g.Begin(ctx, resume(r, tok, nil))
	wantReason(t, err, ReasonExpired)
	step("expired", "resume tools/call deploy expired round=0 kid=")

	// Rounds exceeded: a token of round 3 from a guard with a higher cap.
	high := New(fx.codec, &Options{MaxRounds: 10, Now: fx.clk.Now})
	hf, _ := high.Begin(ctx, r)
	for range 3 {
		tok, _ = hf.Pause(nil, "k")
		hf, _ = high.Begin(ctx, resume(r, tok, nil))
	}
	_, err = fx.g.Begin(ctx, resume(r, tok, nil))
	wantReason(t, err, ReasonRoundsExceeded)
	step("rounds exceeded", "resume tools/call deploy rounds_exceeded round=0 kid=")

	// Arguments the hash refuses (a number more precise than a double).
	inexact := resume(r, tok, nil)
	inexact.Arguments = json.RawMessage(`{"service":"api","env":"production","n":12345678901234567890123}`)
	_, err = fx.g.Begin(ctx, inexact)
	if !errors.Is(err, ErrInvalidArguments) {
		t.Fatal(err)
	}
	step("invalid arguments", "resume tools/call deploy invalid_arguments round=0 kid=")

	// A handler error releases the reservation.
	tok = fx.pause(t, r)
	log.take()
	f, err = fx.g.Begin(ctx, resume(r, tok, nil))
	if err != nil {
		t.Fatal(err)
	}
	f.End(ctx, errors.New("handler failed"))
	step("handler error",
		"store reserve ok",
		"resume tools/call deploy ok round=1 kid=k1",
		"store release ok",
		"end tools/call deploy resumed=true round=1 paused=false kid= failed=true")

	// Calls carry the request's identity, _meta and start.
	for _, e := range log.ends {
		if e.ProtocolVersion != "2026-07-28" || e.Meta["traceparent"] == nil || e.Start.IsZero() || e.Duration < 0 {
			t.Fatalf("end event %+v", e)
		}
	}
	for _, e := range log.pauses {
		if e.TokenBytes < 100 || e.Meta["traceparent"] == nil {
			t.Fatalf("pause event %+v", e)
		}
	}

	// A store outage.
	out := newFixture(t, &Options{Store: &brokenStore{}, Observer: log})
	tok = out.pause(t, r)
	log.take()
	_, err = out.g.Begin(ctx, resume(r, tok, nil))
	if !errors.Is(err, ErrStoreUnavailable) {
		t.Fatal(err)
	}
	step("store outage", "store reserve error", "resume tools/call deploy store_unavailable round=0 kid=")

	// The rounds cap hit by Pause is not a pause.
	capped := newFixture(t, &Options{MaxRounds: 1, Observer: log})
	f, _ = capped.g.Begin(ctx, r)
	tok, _ = f.Pause(nil, "k")
	f, _ = capped.g.Begin(ctx, resume(r, tok, nil))
	if _, err := f.Pause(nil, "k"); err == nil {
		t.Fatal("paused past the cap")
	}
	f.End(ctx, nil)
	step("pause at the cap",
		"pause tools/call deploy round=1 kid=k1",
		"resume tools/call deploy ok round=1 kid=k1",
		"end tools/call deploy resumed=true round=1 paused=false kid= failed=false")
}

// TestObserverStoreOutcomes pins how a store's errors are classified, and
// that wrapping keeps the store's NonBlocking mark and Policy's Store.
func TestObserverStoreOutcomes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want StoreOutcome
	}{
		{nil, StoreOK},
		{replay.ErrReplayed, StoreReplayed},
		{fmt.Errorf("redisstore: reserve: %w", replay.ErrReplayed), StoreReplayed},
		{fmt.Errorf("no reply within 1s: %w", context.DeadlineExceeded), StoreTimeout},
		{errors.New("connection refused"), StoreError},
	} {
		if got := storeOutcome(tc.err); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.err, got, tc.want)
		}
	}
	mem := replay.NewMemory(nil)
	g := New(reqstate.New(mustRing(t), nil), &Options{Store: mem, Observer: NopObserver{}})
	if _, ok := g.opts.Store.(replay.NonBlocking); !ok {
		t.Fatal("the observed memory store lost its NonBlocking mark")
	}
	if g.Policy().Store != replay.Store(mem) {
		t.Fatal("Policy does not return the store given")
	}
	g = New(reqstate.New(mustRing(t), nil), &Options{Store: &brokenStore{}, Observer: NopObserver{}})
	if _, ok := g.opts.Store.(replay.NonBlocking); ok {
		t.Fatal("a blocking store became NonBlocking")
	}
}

func mustRing(t testing.TB) *reqstate.KeyRing {
	ring, err := reqstate.GenerateKeyRing("k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

// TestObserverCostsNothingUnset pins that events cost no allocation:
// a whole pause and resume allocates as much with a no-op Observer as
// without one (no store: the store wrapper's reservation is the one
// allocation an Observer adds, per resume).
func TestObserverCostsNothingUnset(t *testing.T) {
	ring := mustRing(t)
	codec := reqstate.New(ring, nil)
	flow := func(g *Guard) func() {
		r := deployReq()
		r.Meta = map[string]any{"traceparent": "x"}
		return func() {
			f, err := g.Begin(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := f.Pause(nil, "confirm")
			if err != nil {
				t.Fatal(err)
			}
			f.End(context.Background(), nil)
			f, err = g.Begin(context.Background(), resume(r, tok, nil))
			if err != nil {
				t.Fatal(err)
			}
			f.End(context.Background(), nil)
		}
	}
	plain := testing.AllocsPerRun(200, flow(New(codec, nil)))
	observed := testing.AllocsPerRun(200, flow(New(codec, &Options{Observer: NopObserver{}})))
	if observed != plain {
		t.Fatalf("a pause and resume allocates %v times with a no-op Observer, %v without", observed, plain)
	}
}
