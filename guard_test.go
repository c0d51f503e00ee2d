package mrtr

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/mrtr-go/mrtr/internal/testing/fakeclock"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// useMemoryStore in Options.Store asks newFixture for a memory store on the fixture's clock.
var useMemoryStore replay.Store = &brokenStore{name: "memory placeholder"}

type fixture struct {
	g     *Guard
	clk   *fakeclock.Clock
	logs  *bytes.Buffer
	codec *reqstate.AESGCM
}

func newFixture(t *testing.T, opts *Options) *fixture {
	t.Helper()
	ring, err := reqstate.GenerateKeyRing("k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := fakeclock.New(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	logs := new(bytes.Buffer)
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.Now = clk.Now
	if o.Store == useMemoryStore {
		o.Store = replay.NewMemory(&replay.MemoryOptions{Now: clk.Now}) // the store judges expiry on the same clock
	}
	o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	codec := reqstate.New(ring, nil)
	return &fixture{g: New(codec, &o), clk: clk, logs: logs, codec: codec}
}

func deployReq() *Request {
	return &Request{
		Method:          "tools/call",
		ProtocolVersion: "2026-07-28",
		Target:          "deploy",
		Principal:       reqstate.Principal{Issuer: "https://id.example", Subject: "alice"},
		Arguments:       json.RawMessage(`{"service":"api","env":"production"}`),
	}
}

type deployCont struct {
	Service string `json:"service"`
	Env     string `json:"env"`
}

// pause runs a first call that pauses and returns the sealed state.
func (fx *fixture) pause(t *testing.T, r *Request) string {
	t.Helper()
	f, err := fx.g.Begin(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := f.Pause(deployCont{"api", "production"}, "confirm")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.End(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	return tok
}

func resume(r *Request, tok string, answers map[string]any) *Request {
	c := *r
	c.RequestState = tok
	c.InputResponses = answers
	return &c
}

func wantReason(t *testing.T, err error, want Reason) {
	t.Helper()
	var re *RejectError
	if !errors.As(err, &re) || re.Reason != want || !errors.Is(err, ErrRejected) {
		t.Fatalf("error %v, want reason %s", err, want)
	}
}

func TestFirstCallAndResume(t *testing.T) {
	fx := newFixture(t, nil)
	r := deployReq()
	f, err := fx.g.Begin(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	if f.Resumed() || f.Round() != 0 || f.ID() != "" {
		t.Fatalf("first call: resumed=%v round=%d id=%q", f.Resumed(), f.Round(), f.ID())
	}
	if _, ok, err := Decode[deployCont](f); ok || err != nil {
		t.Fatal("first call has a continuation")
	}
	tok, err := f.Pause(deployCont{"api", "production"}, "confirm")
	if err != nil {
		t.Fatal(err)
	}
	flowID := f.ID()
	if _, err := f.Pause(nil); err == nil {
		t.Fatal("second Pause in one call succeeded")
	}
	f.End(t.Context(), nil)

	answers := map[string]any{
		"confirm": json.RawMessage(`{"action":"accept","content":{"approve":true}}`),
		"extra":   json.RawMessage(`{"action":"accept"}`),
	}
	f2, err := fx.g.Begin(t.Context(), resume(r, tok, answers))
	if err != nil {
		t.Fatal(err)
	}
	c, ok, err := Decode[deployCont](f2)
	if !ok || err != nil || c != (deployCont{"api", "production"}) {
		t.Fatalf("continuation %+v %v %v", c, ok, err)
	}
	if !f2.Resumed() || f2.Round() != 1 || f2.ID() != flowID {
		t.Fatalf("resume: resumed=%v round=%d id=%q want %q", f2.Resumed(), f2.Round(), f2.ID(), flowID)
	}
	if _, ok := f2.Answer("confirm"); !ok {
		t.Fatal("asked answer missing")
	}
	if _, ok := f2.Answer("extra"); ok {
		t.Fatal("an answer to an unasked key reached the handler")
	}
	if len(f2.Answers()) != 1 || strings.Join(f2.Asked(), ",") != "confirm" {
		t.Fatalf("answers %v asked %v", f2.Answers(), f2.Asked())
	}
	// A third round keeps the flow id and counts on.
	tok2, err := f2.Pause(nil, "again")
	if err != nil {
		t.Fatal(err)
	}
	f3, err := fx.g.Begin(t.Context(), resume(r, tok2, nil))
	if err != nil || f3.Round() != 2 || f3.ID() != flowID {
		t.Fatalf("round 3: %v round=%d", err, f3.Round())
	}
	if err := f3.Continuation(new(deployCont)); !errors.Is(err, ErrNoContinuation) {
		t.Fatalf("pause without continuation: %v", err)
	}
}

func TestUnverifiedAnswers(t *testing.T) {
	fx := newFixture(t, nil)
	r := deployReq()
	r.InputResponses = map[string]any{"user_name": json.RawMessage(`{"action":"accept"}`)}
	f, err := fx.g.Begin(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Answer("user_name"); ok {
		t.Fatal("an answer without requestState counted as verified")
	}
	if _, ok := f.Unverified("user_name"); !ok {
		t.Fatal("unverified answer not available")
	}
}

func TestTamperedTokens(t *testing.T) {
	fx := newFixture(t, nil)
	r := deployReq()
	tok := fx.pause(t, r)
	for i := range len(tok) {
		b := []byte(tok)
		b[i] ^= 0x01
		_, err := fx.g.Begin(t.Context(), resume(r, string(b), nil))
		wantReason(t, err, ReasonInvalid)
	}
	for _, bad := range []string{tok + "-TAMPERED", tok[:len(tok)-1], "x", strings.Repeat("A", 1<<20)} {
		_, err := fx.g.Begin(t.Context(), resume(r, bad, nil))
		wantReason(t, err, ReasonInvalid)
	}
	if strings.Contains(fx.logs.String(), tok[10:40]) {
		t.Fatal("a log line contains the token")
	}
	if !strings.Contains(fx.logs.String(), "reason=invalid") || !strings.Contains(fx.logs.String(), "token=") {
		t.Fatalf("logs lack reason or fingerprint: %s", fx.logs.String()[:200])
	}
}

func TestMovedTokens(t *testing.T) {
	fx := newFixture(t, nil)
	r := deployReq()
	tok := fx.pause(t, r)
	for name, change := range map[string]func(*Request){
		"tool":      func(r *Request) { r.Target = "transfer" },
		"prompt":    func(r *Request) { r.Method = "prompts/get" },
		"resource":  func(r *Request) { r.Method, r.Target = "resources/read", "test://static-text" },
		"issuer":    func(r *Request) { r.Principal.Issuer = "https://evil.example" },
		"subject":   func(r *Request) { r.Principal.Subject = "mallory" },
		"anonymous": func(r *Request) { r.Principal = reqstate.Principal{} },
		"version":   func(r *Request) { r.ProtocolVersion = "2025-11-25" },
	} {
		c := resume(r, tok, nil)
		change(c)
		_, err := fx.g.Begin(t.Context(), c)
		if err == nil {
			t.Fatalf("%s: moved token accepted", name)
		}
		wantReason(t, err, ReasonInvalid)
	}
	// Another server sharing the keys.
	other := New(fx.codec, &Options{ServerID: "other", Now: fx.clk.Now})
	_, err := other.Begin(t.Context(), resume(r, tok, nil))
	wantReason(t, err, ReasonInvalid)
}

func TestArgumentsChanged(t *testing.T) {
	fx := newFixture(t, nil)
	r := deployReq()
	tok := fx.pause(t, r)
	c := resume(r, tok, nil)
	c.Arguments = json.RawMessage(`{"service":"api","env":"staging"}`)
	_, err := fx.g.Begin(t.Context(), c)
	wantReason(t, err, ReasonArgumentsChanged)
	// The same arguments in another order and spacing are the same call.
	c.Arguments = json.RawMessage(`{ "env": "production", "service": "api" }`)
	if _, err := fx.g.Begin(t.Context(), c); err != nil {
		t.Fatalf("reordered arguments: %v", err)
	}
}

func TestExpiry(t *testing.T) {
	fx := newFixture(t, &Options{TTL: time.Minute, Leeway: 2 * time.Second})
	r := deployReq()
	tok := fx.pause(t, r)
	fx.clk.Advance(time.Minute + 2*time.Second)
	if _, err := fx.g.Begin(t.Context(), resume(r, tok, nil)); err != nil {
		t.Fatalf("within leeway: %v", err)
	}
	fx.clk.Advance(time.Millisecond)
	_, err := fx.g.Begin(t.Context(), resume(r, tok, nil))
	wantReason(t, err, ReasonExpired)

	// Issued in the future: a node whose clock runs ahead.
	fx.clk.Advance(-time.Hour)
	_, err = fx.g.Begin(t.Context(), resume(r, tok, nil))
	wantReason(t, err, ReasonExpired)
}

func TestAnonymousTTL(t *testing.T) {
	fx := newFixture(t, nil)
	r := deployReq()
	r.Principal = reqstate.Principal{}
	tok := fx.pause(t, r)
	fx.clk.Advance(DefaultAnonymousTTL + DefaultLeeway + time.Millisecond)
	_, err := fx.g.Begin(t.Context(), resume(r, tok, nil))
	wantReason(t, err, ReasonExpired)
}

func TestRoundCap(t *testing.T) {
	fx := newFixture(t, &Options{MaxRounds: 3})
	r := deployReq()
	f, _ := fx.g.Begin(t.Context(), r)
	for round := 1; ; round++ {
		tok, err := f.Pause(nil, "k")
		if round > 3 {
			wantReason(t, err, ReasonRoundsExceeded)
			break
		}
		if err != nil {
			t.Fatalf("pause %d: %v", round, err)
		}
		if f, err = fx.g.Begin(t.Context(), resume(r, tok, nil)); err != nil {
			t.Fatal(err)
		}
	}
	// A token sealed under a higher cap is refused after the cap is lowered.
	high := New(fx.codec, &Options{MaxRounds: 10, Now: fx.clk.Now})
	f, _ = high.Begin(t.Context(), r)
	var tok string
	for range 5 {
		tok, _ = f.Pause(nil, "k")
		f, _ = high.Begin(t.Context(), resume(r, tok, nil))
	}
	_, err := fx.g.Begin(t.Context(), resume(r, tok, nil))
	wantReason(t, err, ReasonRoundsExceeded)
}

func TestSingleUseConcurrent(t *testing.T) {
	fx := newFixture(t, &Options{Store: useMemoryStore})
	r := deployReq()
	tok := fx.pause(t, r)
	var ran, replayed atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			f, err := fx.g.Begin(context.Background(), resume(r, tok, nil))
			var re *RejectError
			switch {
			case err == nil:
				ran.Add(1)
				time.Sleep(time.Millisecond) // hold the reservation a while
				f.End(context.Background(), nil)
			case errors.As(err, &re) && re.Reason == ReasonReplayed:
				replayed.Add(1)
			default:
				t.Errorf("unexpected error %v", err)
			}
		})
	}
	wg.Wait()
	if ran.Load() != 1 || replayed.Load() != 31 {
		t.Fatalf("ran %d, replayed %d; want 1 and 31", ran.Load(), replayed.Load())
	}
	_, err := fx.g.Begin(t.Context(), resume(r, tok, nil))
	wantReason(t, err, ReasonReplayed)
}

func TestHandlerErrorReleases(t *testing.T) {
	fx := newFixture(t, &Options{Store: useMemoryStore})
	r := deployReq()
	tok := fx.pause(t, r)
	f, err := fx.g.Begin(t.Context(), resume(r, tok, nil))
	if err != nil {
		t.Fatal(err)
	}
	f.End(t.Context(), errors.New("handler failed"))
	f, err = fx.g.Begin(t.Context(), resume(r, tok, nil))
	if err != nil {
		t.Fatalf("token burnt by a failed handler: %v", err)
	}
	f.End(t.Context(), nil)
	_, err = fx.g.Begin(t.Context(), resume(r, tok, nil))
	wantReason(t, err, ReasonReplayed)
}

type brokenStore struct{ name string }

func (*brokenStore) Reserve(context.Context, string, time.Time) (replay.Reservation, error) {
	return nil, errors.New("connection refused")
}

func TestStoreOutageFailsClosed(t *testing.T) {
	fx := newFixture(t, &Options{Store: &brokenStore{}})
	r := deployReq()
	tok := fx.pause(t, r) // pausing needs no store
	_, err := fx.g.Begin(t.Context(), resume(r, tok, nil))
	if !errors.Is(err, ErrStoreUnavailable) || errors.Is(err, ErrRejected) {
		t.Fatalf("store outage: %v", err)
	}
	// First calls are not resumes and keep working.
	if _, err := fx.g.Begin(t.Context(), r); err != nil {
		t.Fatal(err)
	}
}

// recordingStore wraps a store and records whether each call's context
// carried a deadline. It does not implement replay.NonBlocking unless
// wrapped in nonBlockingStore.
type recordingStore struct {
	inner     replay.Store
	deadlines []bool // one per Reserve, Commit or Release, in order
}

func (s *recordingStore) Reserve(ctx context.Context, id string, exp time.Time) (replay.Reservation, error) {
	_, ok := ctx.Deadline()
	s.deadlines = append(s.deadlines, ok)
	res, err := s.inner.Reserve(ctx, id, exp)
	if err != nil {
		return nil, err
	}
	return recordingReservation{res, s}, nil
}

type recordingReservation struct {
	replay.Reservation
	s *recordingStore
}

func (r recordingReservation) Commit(ctx context.Context) error {
	_, ok := ctx.Deadline()
	r.s.deadlines = append(r.s.deadlines, ok)
	return r.Reservation.Commit(ctx)
}

type nonBlockingStore struct{ *recordingStore }

func (nonBlockingStore) NonBlocking() {}

// boundedStore says that it bounds each call by limit itself.
type boundedStore struct {
	*recordingStore
	limit time.Duration
}

func (s boundedStore) CallTimeout() time.Duration { return s.limit }

// TestStoreTimeout checks that every call to a store that may block is
// bounded by StoreTimeout, and that a store that never blocks, or bounds
// its calls by StoreTimeout or less itself (replay.Bounded), is called
// without a timer, with or without an Observer's wrapper.
func TestStoreTimeout(t *testing.T) {
	const timeout = time.Second
	for _, tc := range []struct {
		name     string
		store    func(*recordingStore) replay.Store
		deadline bool // want a deadline on Reserve and Commit
	}{
		{"blocking", func(r *recordingStore) replay.Store { return r }, true},
		{"NonBlocking", func(r *recordingStore) replay.Store { return nonBlockingStore{r} }, false},
		{"Bounded shorter", func(r *recordingStore) replay.Store { return boundedStore{r, timeout / 2} }, false},
		{"Bounded equal", func(r *recordingStore) replay.Store { return boundedStore{r, timeout} }, false},
		{"Bounded longer", func(r *recordingStore) replay.Store { return boundedStore{r, timeout + 1} }, true},
	} {
		for _, observed := range []bool{false, true} {
			rec := &recordingStore{}
			opts := &Options{Store: tc.store(rec), StoreTimeout: timeout}
			if observed {
				opts.Observer = NopObserver{}
			}
			fx := newFixture(t, opts)
			rec.inner = replay.NewMemory(&replay.MemoryOptions{Now: fx.clk.Now})
			r := deployReq()
			tok := fx.pause(t, r)
			f, err := fx.g.Begin(t.Context(), resume(r, tok, nil))
			if err != nil {
				t.Fatal(err)
			}
			if err := f.End(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
			if len(rec.deadlines) != 2 || rec.deadlines[0] != tc.deadline || rec.deadlines[1] != tc.deadline {
				t.Errorf("%s, observed %v: deadlines on Reserve and Commit = %v, want %v", tc.name, observed, rec.deadlines, tc.deadline)
			}
		}
	}
}

// hangingStore blocks every Reserve until its context is done.
type hangingStore struct{}

func (hangingStore) Reserve(ctx context.Context, _ string, _ time.Time) (replay.Reservation, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestStoreTimeoutFailsClosed(t *testing.T) {
	fx := newFixture(t, &Options{Store: hangingStore{}, StoreTimeout: 10 * time.Millisecond})
	r := deployReq()
	tok := fx.pause(t, r)
	_, err := fx.g.Begin(t.Context(), resume(r, tok, nil))
	if !errors.Is(err, ErrStoreUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hanging store: %v, want ErrStoreUnavailable from the deadline", err)
	}
}

func TestContext(t *testing.T) {
	fx := newFixture(t, nil)
	f, _ := fx.g.Begin(t.Context(), deployReq())
	if FromContext(NewContext(t.Context(), f)) != f || FromContext(t.Context()) != nil {
		t.Fatal("context round trip")
	}
}

func TestNewDefaultsAndPanics(t *testing.T) {
	ring, _ := reqstate.GenerateKeyRing("k", nil)
	p := New(reqstate.New(ring, nil), nil).Policy()
	if p.TTL != DefaultTTL || p.AnonymousTTL != DefaultAnonymousTTL || p.MaxRounds != DefaultMaxRounds ||
		p.Leeway != DefaultLeeway || p.ServerID != DefaultServerID || p.StoreTimeout != DefaultStoreTimeout {
		t.Fatalf("defaults: %+v", p)
	}
	if p := New(reqstate.New(ring, nil), &Options{Leeway: -1}).Policy(); p.Leeway != 0 {
		t.Fatal("negative leeway should mean none")
	}
	for name, f := range map[string]func(){
		"nil codec":    func() { New(nil, nil) },
		"negative ttl": func() { New(reqstate.New(ring, nil), &Options{TTL: -1}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// oldLease is how long a reservation lasted before issue 9: a token whose
// commit was lost could run its handler again this long after it started.
const oldLease = 2 * time.Minute

// failingCommits wraps a store: every Reserve reaches it, every Commit fails
// without reaching it, as a commit lost to a timeout or a network failure.
type failingCommits struct{ replay.Store }

func (s failingCommits) Reserve(ctx context.Context, id string, exp time.Time) (replay.Reservation, error) {
	r, err := s.Store.Reserve(ctx, id, exp)
	if err != nil {
		return nil, err
	}
	return failingCommit{r}, nil
}

type failingCommit struct{ replay.Reservation }

func (failingCommit) Commit(context.Context) error { return errors.New("i/o timeout") }

// memStore returns a memory store on fx's clock.
func (fx *fixture) memStore() *replay.Memory {
	return replay.NewMemory(&replay.MemoryOptions{Now: fx.clk.Now})
}

// Issue 9, item 2: a commit that fails after the handler succeeded does not
// make the token usable again, neither after the old two-minute lease nor
// at any time before the token expires.
func TestSingleUseCommitFails(t *testing.T) {
	fx := newFixture(t, &Options{TTL: 5 * time.Minute})
	fx.g.opts.Store = failingCommits{fx.memStore()}
	r := deployReq()
	tok := fx.pause(t, r)
	f, err := fx.g.Begin(t.Context(), resume(r, tok, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.End(t.Context(), nil); err == nil {
		t.Fatal("End with a failing commit = nil, want the error")
	}
	if !strings.Contains(fx.logs.String(), "commit failed") {
		t.Fatalf("the failed commit was not logged: %s", fx.logs)
	}
	fx.clk.Advance(oldLease + time.Second)
	_, err = fx.g.Begin(t.Context(), resume(r, tok, nil))
	wantReason(t, err, ReasonReplayed)
	fx.clk.Advance(5*time.Minute + DefaultLeeway - oldLease - time.Second) // the last moment the token is accepted
	_, err = fx.g.Begin(t.Context(), resume(r, tok, nil))
	wantReason(t, err, ReasonReplayed)
}

// A node that crashes mid-handler never ends its flow: the token stays
// reserved until it expires.
func TestSingleUseCrashMidHandler(t *testing.T) {
	fx := newFixture(t, &Options{Store: useMemoryStore})
	r := deployReq()
	tok := fx.pause(t, r)
	if _, err := fx.g.Begin(t.Context(), resume(r, tok, nil)); err != nil {
		t.Fatal(err)
	}
	// The process dies here; End never runs.
	for _, d := range []time.Duration{oldLease + time.Second, DefaultTTL + DefaultLeeway - oldLease - time.Second} {
		fx.clk.Advance(d)
		_, err := fx.g.Begin(t.Context(), resume(r, tok, nil))
		wantReason(t, err, ReasonReplayed)
	}
	fx.clk.Advance(time.Millisecond)
	_, err := fx.g.Begin(t.Context(), resume(r, tok, nil))
	wantReason(t, err, ReasonExpired)
}

// A handler slower than the old lease keeps its token: a second resume
// while it runs is refused, and its commit then succeeds.
func TestSingleUseSlowHandler(t *testing.T) {
	fx := newFixture(t, &Options{Store: useMemoryStore})
	r := deployReq()
	tok := fx.pause(t, r)
	f, err := fx.g.Begin(t.Context(), resume(r, tok, nil))
	if err != nil {
		t.Fatal(err)
	}
	fx.clk.Advance(oldLease + time.Second)
	_, err = fx.g.Begin(t.Context(), resume(r, tok, nil))
	wantReason(t, err, ReasonReplayed)
	if err := f.End(t.Context(), nil); err != nil {
		t.Fatalf("commit after a slow handler: %v", err)
	}
	_, err = fx.g.Begin(t.Context(), resume(r, tok, nil))
	wantReason(t, err, ReasonReplayed)
}

// A resume inside the leeway window, after ExpiresAt but before ExpiresAt +
// Leeway, is accepted with a store too: the reservation must reach past
// ExpiresAt, or the store would refuse it as replayed.
func TestSingleUseInsideLeeway(t *testing.T) {
	fx := newFixture(t, &Options{Store: useMemoryStore, TTL: time.Minute, Leeway: 2 * time.Second})
	r := deployReq()
	tok := fx.pause(t, r)
	fx.clk.Advance(time.Minute + time.Second)
	f, err := fx.g.Begin(t.Context(), resume(r, tok, nil))
	if err != nil {
		t.Fatalf("resume inside the leeway window: %v", err)
	}
	if err := f.End(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	_, err = fx.g.Begin(t.Context(), resume(r, tok, nil))
	wantReason(t, err, ReasonReplayed)
}

// nodeView is one node's view of a store shared by several nodes that, like
// Redis (package redisstore), keeps each mark for a lifetime the node
// computes on its own clock: the expiry the node asks for becomes, on the
// store's clock, the store's now plus (expiry - the node's now).
type nodeView struct {
	shared   replay.Store
	nodeNow  func() time.Time
	storeNow func() time.Time
}

func (v nodeView) Reserve(ctx context.Context, id string, exp time.Time) (replay.Reservation, error) {
	return v.shared.Reserve(ctx, id, v.storeNow().Add(exp.Sub(v.nodeNow())))
}

// Issue 9, item 10: two nodes whose clocks differ by the leeway share one
// store. The node ahead runs the token; the node behind still accepts the
// token as unexpired for up to the leeway after the node ahead stops, and
// must find the mark there all that time. The mark is gone once no node can
// accept the token.
func TestSingleUseClockSkew(t *testing.T) {
	const ttl, leeway = time.Minute, 5 * time.Second
	ahead := newFixture(t, &Options{TTL: ttl, Leeway: leeway})
	store := ahead.memStore() // the shared store's clock agrees with the node ahead
	ahead.g.opts.Store = nodeView{store, ahead.clk.Now, ahead.clk.Now}
	behindClk := fakeclock.New(ahead.clk.Now().Add(-leeway))
	behind := New(ahead.codec, &Options{TTL: ttl, Leeway: leeway, Now: behindClk.Now,
		Store: nodeView{store, behindClk.Now, ahead.clk.Now}})
	advance := func(d time.Duration) { ahead.clk.Advance(d); behindClk.Advance(d) }

	r := deployReq()
	tok := ahead.pause(t, r)
	expiresAt := ahead.clk.Now().Add(ttl)
	f, err := ahead.g.Begin(t.Context(), resume(r, tok, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.End(t.Context(), nil); err != nil {
		t.Fatal(err)
	}

	// On the clock ahead: just past what the node ahead accepts, then the
	// last moment the node behind accepts.
	for _, at := range []time.Time{expiresAt.Add(leeway + time.Millisecond), expiresAt.Add(2 * leeway)} {
		advance(at.Sub(ahead.clk.Now()))
		_, err := ahead.g.Begin(t.Context(), resume(r, tok, nil))
		wantReason(t, err, ReasonExpired)
		_, err = behind.Begin(t.Context(), resume(r, tok, nil))
		wantReason(t, err, ReasonReplayed)
	}
	advance(time.Millisecond)
	_, err = behind.Begin(t.Context(), resume(r, tok, nil))
	wantReason(t, err, ReasonExpired)
	if n := store.Len(); n != 0 {
		t.Fatalf("the store keeps %d marks after no node accepts the token", n)
	}
}

// ctxStore wraps a store the way a store doing I/O behaves: a call whose
// context is done fails without taking effect.
type ctxStore struct{ replay.Store }

func (s ctxStore) Reserve(ctx context.Context, id string, exp time.Time) (replay.Reservation, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := s.Store.Reserve(ctx, id, exp)
	if err != nil {
		return nil, err
	}
	return ctxReservation{r}, nil
}

type ctxReservation struct{ replay.Reservation }

func (r ctxReservation) Commit(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return r.Reservation.Commit(ctx)
}

func (r ctxReservation) Release(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return r.Reservation.Release(ctx)
}

// A client that hangs up right after the handler returns cancels the
// request's context; the commit or release must still land, so End settles
// with a context of its own.
func TestEndOutlivesRequestContext(t *testing.T) {
	t.Run("Commit", func(t *testing.T) {
		fx := newFixture(t, nil)
		fx.g.opts.Store = ctxStore{fx.memStore()}
		r := deployReq()
		tok := fx.pause(t, r)
		ctx, hangUp := context.WithCancel(t.Context())
		f, err := fx.g.Begin(ctx, resume(r, tok, nil))
		if err != nil {
			t.Fatal(err)
		}
		hangUp()
		if err := f.End(ctx, nil); err != nil {
			t.Fatalf("commit after the client hung up: %v", err)
		}
		_, err = fx.g.Begin(t.Context(), resume(r, tok, nil))
		wantReason(t, err, ReasonReplayed)
	})
	t.Run("Release", func(t *testing.T) {
		fx := newFixture(t, nil)
		fx.g.opts.Store = ctxStore{fx.memStore()}
		r := deployReq()
		tok := fx.pause(t, r)
		ctx, hangUp := context.WithCancel(t.Context())
		f, err := fx.g.Begin(ctx, resume(r, tok, nil))
		if err != nil {
			t.Fatal(err)
		}
		hangUp()
		if err := f.End(ctx, errors.New("handler failed")); err != nil {
			t.Fatalf("release after the client hung up: %v", err)
		}
		if _, err := fx.g.Begin(t.Context(), resume(r, tok, nil)); err != nil {
			t.Fatalf("retry after a failed handler whose client hung up: %v", err)
		}
	})
}

// Issue 9, item 5: ConsumeOnError spends a token whose handler failed, so
// no handler ever starts twice on one token.
func TestConsumeOnError(t *testing.T) {
	fx := newFixture(t, &Options{Store: useMemoryStore, ConsumeOnError: true})
	r := deployReq()
	tok := fx.pause(t, r)
	f, err := fx.g.Begin(t.Context(), resume(r, tok, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.End(t.Context(), errors.New("handler failed")); err != nil {
		t.Fatal(err)
	}
	_, err = fx.g.Begin(t.Context(), resume(r, tok, nil))
	wantReason(t, err, ReasonReplayed)
	if !fx.g.Policy().ConsumeOnError {
		t.Fatal("Policy lost ConsumeOnError")
	}
	// Without a store there is nothing to consume: tokens stay multi-use.
	fx = newFixture(t, &Options{ConsumeOnError: true})
	tok = fx.pause(t, r)
	for range 2 {
		f, err := fx.g.Begin(t.Context(), resume(r, tok, nil))
		if err != nil {
			t.Fatal(err)
		}
		f.End(t.Context(), errors.New("handler failed"))
	}
}

// The verified answers of a resume cost nothing when every answer was
// asked (the usual resume: the request's map is kept as it is), and are
// still only the asked ones otherwise, duplicate keys in the sealed
// round or not.
func TestResumeAnswers(t *testing.T) {
	g := New(reqstate.New(mustRing(t), nil), nil)
	r := deployReq()
	pause := func(asked ...string) string {
		f, err := g.Begin(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := f.Pause(nil, asked...)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	tok := pause("confirm", "reason")
	begin := func(answers map[string]any) *Flow {
		f, err := g.Begin(context.Background(), resume(r, tok, answers))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	answered := map[string]any{"confirm": true, "reason": "x"}
	without := testing.AllocsPerRun(100, func() { begin(nil) })
	with := testing.AllocsPerRun(100, func() { begin(answered) })
	if with != without {
		t.Errorf("a resume allocates %v times with its answers, %v without", with, without)
	}
	if f := begin(answered); len(f.Answers()) != 2 {
		t.Errorf("answers %v, want both", f.Answers())
	}
	f := begin(map[string]any{"confirm": true, "extra": 1})
	if _, ok := f.Answer("extra"); ok || len(f.Answers()) != 1 {
		t.Errorf("answers %v, want only confirm", f.Answers())
	}
	tok = pause("confirm", "confirm")
	f = begin(map[string]any{"confirm": true, "extra": 1})
	if _, ok := f.Answer("extra"); ok || len(f.Answers()) != 1 {
		t.Errorf("asked twice: answers %v, want only confirm", f.Answers())
	}
}

// Every call allocates a Flow: what only an Observer needs lives apart
// (flowObs), so a Flow stays in the allocator's 320-byte class.
func TestFlowSize(t *testing.T) {
	if n := unsafe.Sizeof(Flow{}); n > 320 {
		t.Errorf("a Flow takes %d bytes, want at most 320", n)
	}
}

// A pause allocates what sealing, hashing the arguments and the flow id
// need, and not the State it seals: reqstate's codec keeps no pointer to
// it, so it stays on Pause's stack.
func TestPauseAllocations(t *testing.T) {
	codec := reqstate.New(mustRing(t), nil)
	g := New(codec, nil)
	r := deployReq()
	begin := func() *Flow {
		f, err := g.Begin(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	asked := []string{"confirm"} // an adapter's, allocated once here
	beginOnly := testing.AllocsPerRun(100, func() { begin() })
	withPause := testing.AllocsPerRun(100, func() {
		if _, err := begin().Pause(nil, asked...); err != nil {
			t.Fatal(err)
		}
	})
	b := r.binding(DefaultServerID)
	now := time.Now()
	sealOnly := testing.AllocsPerRun(100, func() {
		if _, err := codec.Seal(b, &reqstate.State{Round: 1, IssuedAt: now, ExpiresAt: now.Add(time.Minute), Asked: asked}); err != nil {
			t.Fatal(err)
		}
	})
	hash := testing.AllocsPerRun(100, func() { _, _ = reqstate.HashArguments(r.Arguments) })
	id := testing.AllocsPerRun(100, func() { _, _ = reqstate.NewID(nil) })
	if pause := withPause - beginOnly; pause > sealOnly+hash+id {
		t.Errorf("a pause allocates %v times; sealing %v, hashing %v, the flow id %v", pause, sealOnly, hash, id)
	}
}
