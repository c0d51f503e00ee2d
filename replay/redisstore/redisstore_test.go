package redisstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mrtr-go/mrtr/internal/testing/fakeclock"
	"github.com/mrtr-go/mrtr/internal/testing/testredis"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/replay/redisstore"
	"github.com/mrtr-go/mrtr/replay/replaytest"
)

// bound is how long a call to an unreachable or frozen Redis may take before
// a test calls it a hang. It is far above the timeouts the tests configure,
// and far below go-redis's own read timeouts.
const bound = 10 * time.Second

// newID returns a fresh id shaped like a token's jti.
func newID() string { return rand.Text()[:22] }

// newPrefix returns a key prefix no other test uses, so that tests sharing a
// server (MRTR_TEST_REDIS_URL) cannot see each other's keys.
func newPrefix() string { return "mrtr:test:" + rand.Text()[:8] + ":" }

func newStore(t *testing.T, url string, opts *redisstore.Options) *redisstore.Store {
	t.Helper()
	s, err := redisstore.NewFromURL(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func newClient(t *testing.T, url string) *redis.Client {
	t.Helper()
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ageScript makes Redis's clock appear to move forward by ARGV[2]
// milliseconds for the keys under the prefix ARGV[1]: each key's remaining
// lifetime shrinks by that much, and a key whose lifetime runs out is
// deleted, exactly as if that much time had passed on the server.
var ageScript = redis.NewScript(`
local n = 0
for _, k in ipairs(redis.call('KEYS', ARGV[1] .. '*')) do
	local ttl = redis.call('PTTL', k)
	if ttl >= 0 then
		if ttl <= tonumber(ARGV[2]) then
			redis.call('DEL', k)
		else
			redis.call('PEXPIRE', k, ttl - tonumber(ARGV[2]))
		end
		n = n + 1
	end
end
return n
`)

// agedClock is a fake clock for a store and the Redis keys under its prefix:
// Advance moves the clock the store computes lifetimes from, and ages the
// keys on the server by the same amount. The contract suite thus runs on the
// real server without waiting for anything: Redis's own expiry of a key,
// moved forward by Advance, is what makes a deadline pass.
type agedClock struct {
	t      testing.TB
	clk    *fakeclock.Clock
	raw    redis.UniversalClient // a Cluster's keys are aged on every primary
	prefix string
}

func newAgedClock(t testing.TB, raw redis.UniversalClient, prefix string) *agedClock {
	return &agedClock{t: t, clk: fakeclock.New(time.Now()), raw: raw, prefix: prefix}
}

func (c *agedClock) Now() time.Time { return c.clk.Now() }

func (c *agedClock) Advance(d time.Duration) {
	if d < 0 {
		c.t.Fatalf("agedClock: cannot move back by %v", d)
	}
	c.clk.Advance(d)
	var err error
	if cc, ok := c.raw.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
			return ageScript.Run(ctx, m, nil, c.prefix, d.Milliseconds()).Err()
		})
	} else {
		err = ageScript.Run(context.Background(), c.raw, nil, c.prefix, d.Milliseconds()).Err()
	}
	if err != nil {
		c.t.Fatalf("age keys by %v: %v", d, err)
	}
}

// runContract runs the contract suite with a fresh prefix and aged clock for
// every subtest, the store made by newStore.
func runContract(t *testing.T, raw redis.UniversalClient, newStore func(t *testing.T, opts *redisstore.Options) replay.Store) {
	replaytest.Run(t, func(t *testing.T) replaytest.Fixture {
		prefix := newPrefix()
		clk := newAgedClock(t, raw, prefix)
		return replaytest.Fixture{
			Store:   newStore(t, &redisstore.Options{Prefix: prefix, Now: clk.Now}),
			Now:     clk.Now,
			Advance: clk.Advance,
		}
	})
}

func TestContract(t *testing.T) {
	url := testredis.Start(t)
	raw := newClient(t, url)
	t.Run("URL", func(t *testing.T) {
		t.Parallel()
		runContract(t, raw, func(t *testing.T, opts *redisstore.Options) replay.Store {
			return newStore(t, url, opts)
		})
	})
	// A client as go-redis makes it by default, without
	// ContextTimeoutEnabled, shared with the caller.
	t.Run("Client", func(t *testing.T) {
		t.Parallel()
		c := newClient(t, url)
		runContract(t, raw, func(t *testing.T, opts *redisstore.Options) replay.Store {
			return redisstore.New(c, opts)
		})
	})
	// go-redis resends a command whose reply it lost, so the server may run
	// any command twice. Here every command does run twice, and the second
	// reply is the one the store sees.
	t.Run("EveryCommandTwice", func(t *testing.T) {
		t.Parallel()
		c := newClient(t, url)
		c.AddHook(twice{})
		runContract(t, raw, func(t *testing.T, opts *redisstore.Options) replay.Store {
			return redisstore.New(c, opts)
		})
	})
}

// twice is a go-redis hook that sends every command once more before
// sending it for real, as a retry after a lost reply does.
type twice struct{}

func (twice) DialHook(next redis.DialHook) redis.DialHook { return next }

func (twice) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		_ = next(ctx, redis.NewCmd(ctx, cmd.Args()...))
		return next(ctx, cmd)
	}
}

func (twice) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Of many concurrent Reserves of one id, exactly one wins and every other is
// refused with ErrReplayed.
func TestConcurrentReserve(t *testing.T) {
	const goroutines, rounds = 64, 20
	store := newStore(t, testredis.Start(t), &redisstore.Options{Prefix: newPrefix()})
	exp := time.Now().Add(time.Hour)
	for range rounds {
		replaytest.RaceReserve(t, store, newID(), exp, goroutines)
	}
}

// Stores with different prefixes on one server do not see each other's ids;
// the keys are laid out as documented.
func TestPrefix(t *testing.T) {
	url := testredis.Start(t)
	ctx := t.Context()
	raw := newClient(t, url)
	pa, pb := newPrefix(), newPrefix()
	a := newStore(t, url, &redisstore.Options{Prefix: pa})
	b := newStore(t, url, &redisstore.Options{Prefix: pb})
	id, exp := newID(), time.Now().Add(time.Hour)

	ra, err := a.Reserve(ctx, id, exp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Reserve(ctx, id, exp); err != nil {
		t.Fatalf("Reserve in another prefix = %v, want nil", err)
	}
	if v := raw.Get(ctx, pa+id).Val(); !strings.HasPrefix(v, "reserved:") {
		t.Fatalf("value under %q = %q, want reserved:<owner>", pa+id, v)
	}
	// A reservation lasts until the token's expiry, like a consumed id.
	if ttl := raw.PTTL(ctx, pa+id).Val(); ttl <= 50*time.Minute || ttl > time.Hour {
		t.Fatalf("PTTL of a reservation = %v, want about an hour", ttl)
	}
	v := raw.Get(ctx, pa+id).Val()
	if err := ra.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Without replicas a Commit keeps the reservation as it is: it already
	// holds the id until the token expires.
	if after := raw.Get(ctx, pa+id).Val(); after != v {
		t.Fatalf("value after Commit = %q, want the reservation %q", after, v)
	}
	if ttl := raw.PTTL(ctx, pa+id).Val(); ttl <= 50*time.Minute || ttl > time.Hour {
		t.Fatalf("PTTL of a consumed id = %v, want about an hour", ttl)
	}
	if _, err := a.Reserve(ctx, id, exp); !errors.Is(err, replay.ErrReplayed) {
		t.Fatalf("Reserve after Commit = %v, want ErrReplayed", err)
	}
	if _, err := b.Reserve(ctx, id, exp); !errors.Is(err, replay.ErrReplayed) {
		t.Fatalf("second Reserve in the other prefix = %v, want ErrReplayed", err)
	}

	// The default prefix.
	def := redisstore.New(raw, nil)
	id = newID()
	if _, err := def.Reserve(ctx, id, exp); err != nil {
		t.Fatal(err)
	}
	if n := raw.Exists(ctx, redisstore.DefaultPrefix+id).Val(); n != 1 {
		t.Fatalf("no key %q", redisstore.DefaultPrefix+id)
	}
	raw.Del(ctx, redisstore.DefaultPrefix+id)
}

// short is the store timeout of calls that must fail: a server that is down
// or frozen cannot answer them, however long they wait. The calls that must
// succeed get bound instead (redisstore.SetTimeout), so that no outcome
// depends on how fast a busy machine answers.
const short = 200 * time.Millisecond

// Redis going away makes every call fail closed within the timeout, and the
// same Store works again once Redis is back on the same address.
func TestOutage(t *testing.T) {
	srv := testredis.StartServer(t)
	store := newStore(t, srv.URL(), &redisstore.Options{Prefix: newPrefix(), Timeout: bound})
	ctx := t.Context()
	exp := time.Now().Add(time.Hour)

	held, before, released := newID(), newID(), newID()
	r, err := store.Reserve(ctx, held, exp)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := store.Reserve(ctx, released, exp)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Ping(ctx); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	redisstore.SetTimeout(store, short)
	failsClosed(t, "Reserve", func() error { _, err := store.Reserve(ctx, before, exp); return err })
	failsClosed(t, "Release", func() error { return rr.Release(ctx) })
	failsClosed(t, "Ping", func() error { return store.Ping(ctx) })
	// Without replicas a Commit makes no round trip (the reservation holds
	// the id until the token expires): it succeeds with Redis down.
	if err := r.Commit(ctx); err != nil {
		t.Fatalf("Commit without a server = %v, want nil (no round trip)", err)
	}

	srv.Start()
	redisstore.SetTimeout(store, bound)
	if _, err := store.Reserve(ctx, before, exp); err != nil {
		t.Fatalf("Reserve after restart = %v", err)
	}
	// The restart lost every key and the script cache: the retried
	// Release runs its script with EVAL, and finds nothing to delete.
	if err := rr.Release(ctx); err != nil {
		t.Fatalf("Release retried after restart = %v, want nil", err)
	}
	// What a restart without persistence loses: the claims it forgot,
	// committed or not (see "Deployment" in the package documentation).
	if _, err := store.Reserve(ctx, held, exp); err != nil {
		t.Fatalf("Reserve of an id the restart forgot = %v, want nil", err)
	}
}

// A Redis that accepts connections but answers nothing costs each call at
// most about the timeout, whether or not the client honours context
// deadlines itself.
func TestUnresponsive(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T, url string, opts *redisstore.Options) *redisstore.Store
	}{
		{"URL", newStore},
		{"Client", func(t *testing.T, url string, opts *redisstore.Options) *redisstore.Store {
			o, err := redis.ParseURL(url)
			if err != nil {
				t.Fatal(err)
			}
			// A client that would wait a minute for each reply, and retry.
			o.ReadTimeout, o.WriteTimeout = time.Minute, time.Minute
			c := redis.NewClient(o)
			t.Cleanup(func() { _ = c.Close() })
			return redisstore.New(c, opts)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := testredis.StartServer(t)
			store := tc.store(t, srv.URL(), &redisstore.Options{Prefix: newPrefix(), Timeout: bound})
			ctx := t.Context()
			exp := time.Now().Add(time.Hour)
			r, err := store.Reserve(ctx, newID(), exp)
			if err != nil {
				t.Fatal(err)
			}

			srv.Pause()
			defer srv.Resume()
			redisstore.SetTimeout(store, short)
			for _, op := range []struct {
				name string
				f    func() error
			}{
				{"Reserve", func() error { _, err := store.Reserve(ctx, newID(), exp); return err }},
				{"Release", func() error { return r.Release(ctx) }},
				{"Ping", func() error { return store.Ping(ctx) }},
			} {
				err := failsClosed(t, op.name, op.f)
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%s on a frozen server = %v, want an error wrapping context.DeadlineExceeded", op.name, err)
				}
			}

			srv.Resume()
			redisstore.SetTimeout(store, bound)
			if _, err := store.Reserve(ctx, newID(), exp); err != nil {
				t.Fatalf("Reserve after resume = %v", err)
			}
			if err := r.Release(ctx); err != nil {
				t.Fatalf("Release retried after resume = %v, want nil", err)
			}
		})
	}
}

// failsClosed checks that f returns an error other than ErrReplayed, and
// returns within bound.
func failsClosed(t *testing.T, name string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err == nil || errors.Is(err, replay.ErrReplayed) {
			t.Fatalf("%s without a server = %v, want an error other than ErrReplayed", name, err)
		}
		if !strings.HasPrefix(err.Error(), "redisstore: ") {
			t.Errorf("%s error %q does not start with redisstore: ", name, err)
		}
		t.Logf("%s failed closed after %v: %v", name, time.Since(start).Round(time.Millisecond), err)
		return err
	case <-time.After(bound):
		t.Fatalf("%s without a server did not return within %v", name, bound)
		return nil
	}
}

// eventually retries f until it returns nil, for up to bound.
func eventually(t *testing.T, name string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for tries := 1; ; tries++ {
		err := f()
		if err == nil {
			t.Logf("%s succeeded after %d tries", name, tries)
			return
		}
		if errors.Is(err, replay.ErrReplayed) || time.Now().After(deadline) {
			t.Fatalf("%s = %v after %d tries", name, err, tries)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A done context fails each call with the context's error and leaves the
// reservation usable.
func TestContextErrors(t *testing.T) {
	store := newStore(t, testredis.Start(t), &redisstore.Options{Prefix: newPrefix()})
	ctx := t.Context()
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	expired, cancel2 := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel2()
	id, exp := newID(), time.Now().Add(time.Hour)

	if _, err := store.Reserve(expired, id, exp); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Reserve = %v, want DeadlineExceeded", err)
	}
	r, err := store.Reserve(ctx, id, exp)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Release(canceled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Release = %v, want Canceled", err)
	}
	if err := r.Commit(canceled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit = %v, want Canceled", err)
	}
	if err := store.Ping(canceled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Ping = %v, want Canceled", err)
	}
	// The failed calls changed nothing: the id is still held, and the
	// reservation can still be committed.
	if _, err := store.Reserve(ctx, id, exp); !errors.Is(err, replay.ErrReplayed) {
		t.Fatalf("Reserve of a held id = %v, want ErrReplayed", err)
	}
	if err := r.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// Concurrent Commits and Releases of one reservation take effect once.
func TestConcurrentCalls(t *testing.T) {
	store := newStore(t, testredis.Start(t), &redisstore.Options{Prefix: newPrefix()})
	ctx := t.Context()
	id, exp := newID(), time.Now().Add(time.Hour)
	r, err := store.Reserve(ctx, id, exp)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 16 {
		wg.Go(func() { errs <- r.Commit(ctx) })
		wg.Go(func() { errs <- r.Release(ctx) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent Commit/Release = %v, want nil", err)
		}
	}
}

func TestNewFromURL(t *testing.T) {
	const secret = "s3cr3t-pw"
	for _, u := range []string{
		"",
		"localhost:6379",
		"http://localhost:6379",
		"redis://localhost:6379/notanumber",
		"redis://localhost:6379/0/1",
		"redis://localhost:6379/0?no_such_option=1",
		"redis://localhost:6379/0?dial_timeout=soon",
		"redis://:" + secret + "@local host:6379/0",
		"redis://:" + secret + "@localhost:port/0",
		"redis://:" + secret + "@[::1/0",
		"unix://",
		"redis://localhost:6379/0?pool_size=-1", // go-redis panics on it
	} {
		s, err := redisstore.NewFromURL(u, nil)
		if err == nil {
			s.Close()
			t.Errorf("NewFromURL(%q) succeeded, want an error", u)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "redisstore: ") || strings.Contains(msg, secret) {
			t.Errorf("NewFromURL(%q) error %q: want a redisstore error without the password", u, msg)
		}
	}

	for _, u := range []string{
		"redis://localhost",
		"redis://user:" + secret + "@localhost:6380/3",
		"rediss://:" + secret + "@redis.example:6380/1?dial_timeout=2s",
		"unix:///run/redis.sock?db=2",
	} {
		s, err := redisstore.NewFromURL(u, nil)
		if err != nil {
			t.Errorf("NewFromURL(%q) = %v", u, err)
			continue
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	}
}

// NewFromURL passes user, password and database through to the server.
func TestNewFromURLAuth(t *testing.T) {
	srv := testredis.StartServer(t)
	ctx := t.Context()
	raw := newClient(t, srv.URL())
	const user, pw = "mrtr-test", "pw-for-test"
	if err := raw.Do(ctx, "ACL", "SETUSER", user, "on", ">"+pw, "~*", "+@all").Err(); err != nil {
		testredis.Unsupported(t, "ACL SETUSER: %v", err) // Redis before 6; fails under MRTR_REQUIRE_REDIS=1
	}
	t.Cleanup(func() { raw.Do(context.Background(), "ACL", "DELUSER", user) })

	prefix := newPrefix()
	good := newStore(t, "redis://"+user+":"+pw+"@"+srv.Addr()+"/5", &redisstore.Options{Prefix: prefix})
	id := newID()
	if _, err := good.Reserve(ctx, id, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	o, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	o.DB = 5
	db5 := redis.NewClient(o)
	defer db5.Close()
	if n := db5.Exists(ctx, prefix+id).Val(); n != 1 {
		t.Fatalf("key not in database 5")
	}

	bad := newStore(t, "redis://"+user+":wrong-pw@"+srv.Addr()+"/5", nil)
	if err := bad.Ping(ctx); err == nil || strings.Contains(err.Error(), "wrong-pw") {
		t.Fatalf("Ping with a wrong password = %v", err)
	}
	if _, err := bad.Reserve(ctx, newID(), time.Now().Add(time.Hour)); err == nil || errors.Is(err, replay.ErrReplayed) {
		t.Fatalf("Reserve with a wrong password = %v, want an error other than ErrReplayed", err)
	}
}

func TestNewPanics(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for name, f := range map[string]func(){
		"nil client":       func() { redisstore.New(nil, nil) },
		"negative timeout": func() { redisstore.New(c, &redisstore.Options{Timeout: -1}) },
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

// New does not take ownership of the client.
func TestCloseLeavesClient(t *testing.T) {
	url := testredis.Start(t)
	c := newClient(t, url)
	s := redisstore.New(c, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("client closed by Store.Close: %v", err)
	}
}

// A claim the server lost (a restart without persistence, a failover to a
// replica that missed it) can let a second reservation claim the id while the
// first handler still runs. With Replicas above zero the first one's Commit
// then reports ErrReplayed and leaves the id consumed, whatever the second
// one does. With Replicas zero the Commit makes no round trip and cannot
// notice: the id is held by the second reservation, and free again if that
// one releases it (what package documentation's "Deployment" says a lost
// claim costs).
func TestCommitAfterLostClaim(t *testing.T) {
	rs := testredis.StartReplicated(t, 1)
	url := rs.Primary.URL()
	ctx := t.Context()
	raw := newClient(t, url)
	for _, replicas := range []int{0, 1} {
		prefix := newPrefix()
		store := newStore(t, url, &redisstore.Options{Prefix: prefix, Replicas: replicas, Timeout: ackTimeout})
		for _, second := range []string{"releases", "commits"} {
			t.Run(fmt.Sprintf("Replicas%d/%s", replicas, second), func(t *testing.T) {
				id, exp := newID(), time.Now().Add(time.Hour)
				first, err := store.Reserve(ctx, id, exp)
				if err != nil {
					t.Fatal(err)
				}
				raw.Del(ctx, prefix+id) // the server forgets the claim
				other, err := store.Reserve(ctx, id, exp)
				if err != nil {
					t.Fatalf("Reserve after the claim was lost = %v", err)
				}
				want := replay.ErrReplayed
				if replicas == 0 {
					want = nil
				}
				if err := first.Commit(ctx); !errors.Is(err, want) {
					t.Fatalf("Commit of the first = %v, want %v", err, want)
				}
				if second == "releases" {
					err = other.Release(ctx)
				} else if err = other.Commit(ctx); errors.Is(err, replay.ErrReplayed) {
					err = nil
				}
				if err != nil {
					t.Fatal(err)
				}
				_, err = store.Reserve(ctx, id, exp)
				if replicas == 0 && second == "releases" {
					if err != nil {
						t.Fatalf("Reserve after the second released = %v, want nil (no commit round trip)", err)
					}
					return
				}
				if !errors.Is(err, replay.ErrReplayed) {
					t.Fatalf("Reserve after both = %v, want ErrReplayed", err)
				}
			})
		}
	}
}

// TestClientAndPrefix: the accessors give the store's own client and key
// prefix, so a directory sharing the deployment writes where the store's
// access rules apply.
func TestClientAndPrefix(t *testing.T) {
	url := testredis.Start(t)
	if p := newStore(t, url, nil).Prefix(); p != redisstore.DefaultPrefix {
		t.Fatalf("Prefix() = %q, want %q", p, redisstore.DefaultPrefix)
	}
	pa := newPrefix()
	s := newStore(t, url, &redisstore.Options{Prefix: pa})
	if p := s.Prefix(); p != pa {
		t.Fatalf("Prefix() = %q, want %q", p, pa)
	}
	id := newID()
	if _, err := s.Reserve(t.Context(), id, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if v := s.Client().Get(t.Context(), pa+id).Val(); !strings.HasPrefix(v, "reserved:") {
		t.Fatalf("the store's client reads %q under the reserved key", v)
	}
	c := newClient(t, url)
	if redisstore.New(c, nil).Client() != redis.UniversalClient(c) {
		t.Fatal("Client() is not the client given to New")
	}
}

// LocalCommit says a Commit waits on nothing exactly when it makes no
// round trip: with Replicas zero.
func TestLocalCommit(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	var st replay.Store = redisstore.New(c, nil)
	lc, ok := st.(replay.LocalCommit)
	if !ok || !lc.LocalCommit() {
		t.Fatalf("Replicas 0: LocalCommit %v, implemented %v; want true", ok && lc.LocalCommit(), ok)
	}
	if _, ok := st.(replay.NonBlocking); ok {
		t.Fatal("a Redis store is NonBlocking: its Reserve waits on Redis")
	}
	if redisstore.New(c, &redisstore.Options{Replicas: 1}).LocalCommit() {
		t.Fatal("Replicas 1: LocalCommit true; its Commit waits for acknowledgments")
	}
}

// A Store says how long its calls take at most (replay.Bounded), so that
// the guard need not set a timer of its own: Options.Timeout, twice that
// with Replicas (an unacknowledged claim is released within a second
// timeout).
func TestCallTimeout(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	for _, tc := range []struct {
		opts *redisstore.Options
		want time.Duration
	}{
		{nil, redisstore.DefaultTimeout},
		{&redisstore.Options{Timeout: time.Second}, time.Second},
		{&redisstore.Options{Timeout: time.Second, Replicas: 1}, 2 * time.Second},
		{&redisstore.Options{Timeout: math.MaxInt64, Replicas: 1}, math.MaxInt64 - 1},
	} {
		var st replay.Store = redisstore.New(c, tc.opts)
		b, ok := st.(replay.Bounded)
		if !ok {
			t.Fatal("a Redis store does not implement replay.Bounded")
		}
		if got := b.CallTimeout(); got != tc.want {
			t.Errorf("%+v: CallTimeout = %v, want %v", tc.opts, got, tc.want)
		}
	}
}
