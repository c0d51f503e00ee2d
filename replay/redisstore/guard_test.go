package redisstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/testing/fakeclock"
	"github.com/mrtr-go/mrtr/internal/testing/testredis"
	"github.com/mrtr-go/mrtr/replay/redisstore"
	"github.com/mrtr-go/mrtr/reqstate"
)

// The guard's single-use guarantees over a real Redis (issue 9, items 2
// and 10, and the mutations the audit found surviving).

const (
	guardTTL    = 5 * time.Minute
	guardLeeway = 5 * time.Second
)

func deployCall() *mrtr.Request {
	return &mrtr.Request{
		Method: "tools/call", ProtocolVersion: "2026-07-28", Target: "deploy",
		Principal: reqstate.Principal{Issuer: "https://id.example", Subject: "alice"},
		Arguments: json.RawMessage(`{"service":"api"}`),
	}
}

// node is one server: a guard on its own clock with its own Redis client and
// store, sharing the prefix of the cluster.
func newNode(t *testing.T, codec reqstate.Codec, url, prefix string, now func() time.Time) *mrtr.Guard {
	store := newStore(t, url, &redisstore.Options{Prefix: prefix, Now: now})
	return mrtr.New(codec, &mrtr.Options{TTL: guardTTL, Leeway: guardLeeway, Store: store, Now: now})
}

func newCodec(t *testing.T) reqstate.Codec {
	ring, err := reqstate.GenerateKeyRing("k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	return reqstate.New(ring, nil)
}

// pauseOn runs a first call on g that pauses, and returns the resume.
func pauseOn(t *testing.T, g *mrtr.Guard) *mrtr.Request {
	t.Helper()
	call := deployCall()
	f, err := g.Begin(t.Context(), call)
	if err != nil {
		t.Fatal(err)
	}
	if call.RequestState, err = f.Pause(nil, "confirm"); err != nil {
		t.Fatal(err)
	}
	if err := f.End(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	return call
}

func wantReason(t *testing.T, err error, want mrtr.Reason) {
	t.Helper()
	var re *mrtr.RejectError
	if !errors.As(err, &re) || re.Reason != want {
		t.Fatalf("Begin = %v, want reason %s", err, want)
	}
}

// Two nodes whose clocks differ by the leeway: the node behind still accepts
// a token for up to the leeway after the node ahead stops accepting it, and
// must find it marked as used all that time.
func TestGuardClockSkew(t *testing.T) {
	url := testredis.Start(t)
	raw := newClient(t, url)
	prefix := newPrefix()
	codec := newCodec(t)
	aheadClk := newAgedClock(t, raw, prefix) // ages the cluster's keys with the clocks
	behindClk := fakeclock.New(aheadClk.Now().Add(-guardLeeway))
	advance := func(d time.Duration) { behindClk.Advance(d); aheadClk.Advance(d) }
	ahead := newNode(t, codec, url, prefix, aheadClk.Now)
	behind := newNode(t, codec, url, prefix, behindClk.Now)

	call := pauseOn(t, ahead)
	expiresAt := aheadClk.Now().Add(guardTTL)
	f, err := ahead.Begin(t.Context(), call)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.End(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	// On the clock ahead: a second after the node ahead stops accepting,
	// and a second before the node behind does. Redis's own clock runs on
	// between the checks; a second is far more than it can matter.
	for _, at := range []time.Time{expiresAt.Add(guardLeeway + time.Second), expiresAt.Add(2*guardLeeway - time.Second)} {
		advance(at.Sub(aheadClk.Now()))
		_, err := ahead.Begin(t.Context(), call)
		wantReason(t, err, mrtr.ReasonExpired)
		_, err = behind.Begin(t.Context(), call)
		wantReason(t, err, mrtr.ReasonReplayed)
	}
	advance(2 * time.Second)
	_, err = behind.Begin(t.Context(), call)
	wantReason(t, err, mrtr.ReasonExpired)
	if keys := raw.Keys(t.Context(), prefix+"*").Val(); len(keys) != 0 {
		t.Fatalf("keys left after no node accepts the token: %d", len(keys))
	}
}

// A client that hangs up right after the handler cancels the request's
// context; the commit must still take effect (here, with no replicas to
// wait for, by keeping the reservation, which a canceled context would have
// failed).
func TestGuardCommitAfterHangUp(t *testing.T) {
	url := testredis.Start(t)
	raw := newClient(t, url)
	prefix := newPrefix()
	g := newNode(t, newCodec(t), url, prefix, time.Now)
	call := pauseOn(t, g)
	ctx, hangUp := context.WithCancel(t.Context())
	f, err := g.Begin(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	hangUp()
	if err := f.End(ctx, nil); err != nil {
		t.Fatalf("End after the client hung up = %v, want the commit to land", err)
	}
	keys := raw.Keys(t.Context(), prefix+"*").Val()
	if len(keys) != 1 || !strings.HasPrefix(raw.Get(t.Context(), keys[0]).Val(), "reserved:") {
		t.Fatalf("keys %v, want the one reservation, kept", keys)
	}
	_, err = g.Begin(t.Context(), call)
	wantReason(t, err, mrtr.ReasonReplayed)
}

// A commit lost to a Redis that stopped answering leaves the token reserved:
// a replay two minutes and a second later (past the lease reservations used
// to have), within the token's lifetime, is refused. Only an acknowledged
// commit (Replicas above zero) talks to Redis at all; see
// TestGuardCommitWithoutRoundTrip for Replicas zero.
func TestGuardCommitLost(t *testing.T) {
	srv := testredis.StartReplicated(t, 1).Primary
	raw := newClient(t, srv.URL())
	prefix := newPrefix()
	clk := newAgedClock(t, raw, prefix)
	// The calls that must succeed have all the time they need; the
	// commit to the frozen server, a short timeout.
	store := newStore(t, srv.URL(), &redisstore.Options{Prefix: prefix, Now: clk.Now, Timeout: bound, Replicas: 1})
	g := mrtr.New(newCodec(t), &mrtr.Options{TTL: guardTTL, Leeway: guardLeeway, Store: store, Now: clk.Now, StoreTimeout: 2 * bound})
	call := pauseOn(t, g)
	f, err := g.Begin(t.Context(), call)
	if err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	redisstore.SetTimeout(store, short)
	err = f.End(t.Context(), nil)
	srv.Resume()
	redisstore.SetTimeout(store, bound)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("End on a frozen Redis = %v, want a timeout", err)
	}
	clk.Advance(2*time.Minute + time.Second)
	_, err = g.Begin(t.Context(), call)
	wantReason(t, err, mrtr.ReasonReplayed)
}

// With Replicas zero a commit makes no round trip: the reservation already
// holds the id until the token expires, so a resume is settled even while
// Redis does not answer, and the token stays spent.
func TestGuardCommitWithoutRoundTrip(t *testing.T) {
	srv := testredis.StartServer(t)
	prefix := newPrefix()
	store := newStore(t, srv.URL(), &redisstore.Options{Prefix: prefix, Timeout: bound})
	g := mrtr.New(newCodec(t), &mrtr.Options{TTL: guardTTL, Leeway: guardLeeway, Store: store, StoreTimeout: 2 * bound})
	call := pauseOn(t, g)
	f, err := g.Begin(t.Context(), call)
	if err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	redisstore.SetTimeout(store, short) // a round trip would fail
	err = f.End(t.Context(), nil)
	srv.Resume()
	redisstore.SetTimeout(store, bound)
	if err != nil {
		t.Fatalf("End on a frozen Redis = %v, want nil: a commit without replicas needs no round trip", err)
	}
	_, err = g.Begin(t.Context(), call)
	wantReason(t, err, mrtr.ReasonReplayed)
}

// A guard in front of a frozen Redis refuses a resume within the store's
// timeout: the guard sets no timer of its own for a store that bounds its
// calls (replay.Bounded), and the store's bound holds through the guard.
func TestGuardFrozenRedis(t *testing.T) {
	srv := testredis.StartServer(t)
	store := newStore(t, srv.URL(), &redisstore.Options{Prefix: newPrefix(), Timeout: bound})
	g := mrtr.New(newCodec(t), &mrtr.Options{Store: store, StoreTimeout: bound})
	call := pauseOn(t, g)
	srv.Pause()
	defer srv.Resume()
	redisstore.SetTimeout(store, short)
	_ = failsClosedGuard(t, func() error {
		_, err := g.Begin(context.Background(), call)
		if !errors.Is(err, mrtr.ErrStoreUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Begin on a frozen Redis = %v, want ErrStoreUnavailable wrapping context.DeadlineExceeded", err)
		}
		return err
	})
}

// failsClosedGuard checks that f returns an error within bound.
func failsClosedGuard(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Begin on a frozen Redis succeeded")
		}
		return err
	case <-time.After(bound):
		t.Fatalf("Begin on a frozen Redis did not return within %v", bound)
		return nil
	}
}
