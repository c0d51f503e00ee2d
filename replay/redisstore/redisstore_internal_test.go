package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
)

// NewFromURL configures the client from the URL, and to honour context
// deadlines on the socket.
func TestNewFromURLOptions(t *testing.T) {
	for _, tc := range []struct {
		url            string
		addr, user, pw string
		db             int
		tls            bool
	}{
		{url: "redis://localhost", addr: "localhost:6379"},
		{url: "redis://:pw@10.0.0.1:6380/3", addr: "10.0.0.1:6380", pw: "pw", db: 3},
		{url: "rediss://app:pw@redis.example:6390/1", addr: "redis.example:6390", user: "app", pw: "pw", db: 1, tls: true},
	} {
		s, err := NewFromURL(tc.url, nil)
		if err != nil {
			t.Fatalf("NewFromURL(%q) = %v", tc.url, err)
		}
		o := s.client.(*redis.Client).Options()
		if o.Addr != tc.addr || o.Username != tc.user || o.Password != tc.pw || o.DB != tc.db ||
			(o.TLSConfig != nil) != tc.tls || !o.ContextTimeoutEnabled || !s.owned {
			t.Errorf("NewFromURL(%q): addr %q user %q db %d tls %v contextTimeout %v owned %v",
				tc.url, o.Addr, o.Username, o.DB, o.TLSConfig != nil, o.ContextTimeoutEnabled, s.owned)
		}
		if tc.tls && o.TLSConfig.ServerName != "redis.example" {
			t.Errorf("TLS ServerName = %q", o.TLSConfig.ServerName)
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}
}

// The Sentinel and Cluster forms of DESIGN.md ("Many nodes on Redis") make
// go-redis's failover and cluster clients, TLS with rediss.
func TestNewFromURLTopologies(t *testing.T) {
	const pw = "s3cr3t-pw"
	t.Run("Sentinel", func(t *testing.T) {
		for _, tc := range []struct {
			url       string
			sentinels []string
			tls       bool
			db        int
		}{
			{url: "redis://sentinel1:26379?master_name=mymaster&addr=sentinel2:26379&addr=sentinel3:26379",
				sentinels: []string{"sentinel1:26379", "sentinel2:26379", "sentinel3:26379"}},
			{url: "rediss://:" + pw + "@sentinel1:26380/2?master_name=mymaster&addr=sentinel2:26380&password=" + pw,
				sentinels: []string{"sentinel1:26380", "sentinel2:26380"}, tls: true, db: 2},
		} {
			s, err := NewFromURL(tc.url, nil)
			if err != nil {
				t.Fatalf("NewFromURL(%q) = %v", tc.url, err)
			}
			c, ok := s.client.(*redis.Client)
			if !ok {
				t.Fatalf("client %T, want *redis.Client (failover)", s.client)
			}
			o := c.Options()
			if (o.TLSConfig != nil) != tc.tls || !o.ContextTimeoutEnabled || o.DB != tc.db {
				t.Errorf("%q: tls %v contextTimeout %v db %d", tc.url, o.TLSConfig != nil, o.ContextTimeoutEnabled, o.DB)
			}
			if o.Addr != "FailoverClient" { // go-redis names a failover client's address so
				t.Errorf("%q: addr %q, want a failover client", tc.url, o.Addr)
			}
			fo, err := parseOptions(tc.url)
			if err != nil || fo.failover == nil {
				t.Fatalf("parseOptions(%q) = %+v, %v; want failover options", tc.url, fo, err)
			}
			if !slices.Equal(fo.failover.SentinelAddrs, tc.sentinels) || fo.failover.MasterName != "mymaster" {
				t.Errorf("%q: sentinels %v, master %q; want %v, mymaster", tc.url, fo.failover.SentinelAddrs, fo.failover.MasterName, tc.sentinels)
			}
			if tc.tls && o.Password != pw {
				t.Errorf("%q: primary password not passed", tc.url)
			}
			s.Close()
		}
	})
	t.Run("Cluster", func(t *testing.T) {
		for _, tc := range []struct {
			url   string
			addrs []string
			tls   bool
		}{
			{url: "redis-cluster://node1:7000?addr=node2:7001&addr=node3:7002", addrs: []string{"node1:7000", "node2:7001", "node3:7002"}},
			{url: "rediss-cluster://app:" + pw + "@node1:7000?addr=node2:7001", addrs: []string{"node1:7000", "node2:7001"}, tls: true},
		} {
			s, err := NewFromURL(tc.url, nil)
			if err != nil {
				t.Fatalf("NewFromURL(%q) = %v", tc.url, err)
			}
			c, ok := s.client.(*redis.ClusterClient)
			if !ok {
				t.Fatalf("client %T, want *redis.ClusterClient", s.client)
			}
			o := c.Options()
			if !slices.Equal(o.Addrs, tc.addrs) || (o.TLSConfig != nil) != tc.tls || !o.ContextTimeoutEnabled {
				t.Errorf("%q: addrs %v tls %v contextTimeout %v", tc.url, o.Addrs, o.TLSConfig != nil, o.ContextTimeoutEnabled)
			}
			if tc.tls && (o.Username != "app" || o.Password != pw || o.TLSConfig.ServerName != "node1") {
				t.Errorf("%q: user %q, TLS ServerName %q", tc.url, o.Username, o.TLSConfig.ServerName)
			}
			s.Close()
		}
	})
	t.Run("Malformed", func(t *testing.T) {
		for _, u := range []string{
			"redis://sentinel1:26379?master_name=",
			"redis://:" + pw + "@sentinel1:26379?master_name=m&addr=bad-addr",
			"redis://:" + pw + "@sentinel1:26379?master_name=m&no_such=" + pw,
			"redis://sentinel1:26379/x?master_name=m",
			"redis://?master_name=m",
			"redis-cluster://",
			"redis-cluster://:" + pw + "@node1:7000/1",
			"redis-cluster://:" + pw + "@node1:7000?addr=node2",
			"redis-cluster://:" + pw + "@node1:7000?db=1",
			"rediss-cluster://:" + pw + "@node1:7000?dial_timeout=" + pw,
			"redis://:" + pw + "@sentinel1:26379?master_name=m&password=" + pw + "&dial_timeout=x" + pw,
		} {
			s, err := NewFromURL(u, nil)
			if err == nil {
				s.Close()
				t.Errorf("NewFromURL(%q) succeeded, want an error", u)
				continue
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "redisstore: ") || strings.Contains(msg, pw) {
				t.Errorf("NewFromURL(%q) error %q: want a redisstore error without the password", u, msg)
			} else {
				t.Logf("%s", msg)
			}
		}
	})
}

// An i/o timeout that a socket deadline derived from the store's deadline
// raises a moment before the context's own timer fires is reported as the
// store's deadline (errors.Is context.DeadlineExceeded), as TestUnresponsive
// expects of a frozen server. Without the slack, the store returned the bare
// "i/o timeout" now and then under load.
func TestRoundTripEarlySocketDeadline(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) { testRoundTripEarlySocketDeadline(t, direct) })
	}
}

func testRoundTripEarlySocketDeadline(t *testing.T, direct bool) {
	synctest.Test(t, func(t *testing.T) {
		s := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), &Options{Timeout: 200 * time.Millisecond})
		s.direct = direct
		defer s.client.Close()
		_, err := roundTrip(t.Context(), s, func(ctx context.Context) (int, error) {
			dl, _ := ctx.Deadline()
			time.Sleep(time.Until(dl) - time.Millisecond) // the socket's timer fires first
			return 0, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
		})
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no reply within 200ms") {
			t.Fatalf("roundTrip = %v, want the store's deadline", err)
		}
		// An i/o timeout well before the deadline is the client's own
		// (a short ReadTimeout), and stays what it is.
		_, err = roundTrip(t.Context(), s, func(ctx context.Context) (int, error) {
			return 0, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
		})
		if errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("roundTrip with an early i/o timeout = %v, want it unchanged", err)
		}
	})
}

// TestWaitBelowReadTimeout: WAIT gives up before the client's socket read
// timeout, whatever the store's own timeout, so a slow replica never makes
// go-redis resend a claim (which fails closed as "sent twice").
func TestWaitBelowReadTimeout(t *testing.T) {
	for _, c := range []struct {
		name    string
		read    time.Duration
		timeout time.Duration
		want    int64
	}{
		{"short store timeout", 0, 500 * time.Millisecond, 250},
		{"long store timeout, default read timeout", 0, 10 * time.Second, -1}, // 3/4 of go-redis's default
		{"long store timeout, 1s read timeout", time.Second, 10 * time.Second, 750},
		{"unbounded reads", -1, 10 * time.Second, 5000},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: c.read})
			defer client.Close()
			s := New(client, &Options{Timeout: c.timeout, Replicas: 1})
			if c.want < 0 {
				c.want = (client.Options().ReadTimeout * 3 / 4).Milliseconds()
			}
			if s.waitMS != c.want {
				t.Fatalf("WAIT timeout %d ms, want %d", s.waitMS, c.want)
			}
		})
	}
}

// A store that made its client (NewFromURL, ContextTimeoutEnabled) runs
// each round trip on the caller's goroutine: the client bounds it by the
// context, and a goroutine, a channel and a closure per call would only
// cost CPU. A caller's client, which may not honour the context, still
// gets a goroutine of its own.
func TestRoundTripDirect(t *testing.T) {
	onCaller := func(s *Store) bool {
		t.Helper()
		on, err := roundTrip(t.Context(), s, func(context.Context) (bool, error) {
			buf := make([]byte, 64<<10)
			// Only the test's own goroutine runs under testing.tRunner.
			return strings.Contains(string(buf[:runtime.Stack(buf, false)]), "testing.tRunner("), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return on
	}
	owned, err := NewFromURL("redis://127.0.0.1:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer owned.Close()
	if !onCaller(owned) {
		t.Error("NewFromURL's store ran a round trip on a goroutine of its own, want the caller's")
	}
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	if onCaller(New(c, nil)) {
		t.Error("New's store ran a round trip on the caller's goroutine, want one of its own")
	}
}

// The round trips of a store that made its client share one deadline per
// slot of its timeout, instead of a context and a timer each: each still
// ends within the timeout of its start, and no more than a slot before it;
// the caller's values reach the client (its hooks), a caller's deadline is
// kept exactly, and a caller's canceled context fails the call at once.
func TestSharedDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 640 * time.Millisecond
		slot := timeout / deadlineSlots
		s, err := NewFromURL("redis://127.0.0.1:1", &Options{Timeout: timeout}) // never dialled
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		type key struct{}
		caller := context.WithValue(t.Context(), key{}, "v")
		type seen struct {
			done     <-chan struct{}
			deadline time.Time
			start    time.Time
		}
		call := func(ctx context.Context, bound time.Duration) seen {
			t.Helper()
			start := time.Now()
			got, err := roundTrip(ctx, s, func(ctx context.Context) (seen, error) {
				if ctx.Value(key{}) != "v" {
					t.Error("the caller's value did not reach the round trip")
				}
				dl, ok := ctx.Deadline()
				if !ok {
					t.Fatal("a round trip without a deadline")
				}
				return seen{ctx.Done(), dl, start}, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if end := got.start.Add(bound); got.deadline.After(end) || !got.deadline.After(end.Add(-slot)) {
				t.Errorf("deadline %v after the start, want in (%v, %v]", got.deadline.Sub(got.start), bound-slot, bound)
			}
			return got
		}
		a := call(caller, timeout)
		time.Sleep(slot / 2)
		if b := call(caller, timeout); b.done != a.done {
			t.Error("two round trips within one slot did not share their deadline")
		}
		time.Sleep(slot / 2)
		c := call(caller, timeout)
		if c.done == a.done {
			t.Error("a round trip a slot later shared the earlier deadline")
		}
		if c.deadline != c.start.Add(timeout) {
			t.Errorf("a new slot's deadline is %v after its start, want %v", c.deadline.Sub(c.start), timeout)
		}

		// A caller's deadline sooner than the timeout is honoured exactly,
		// on a context of its own; a later one changes nothing.
		short, cancel := context.WithTimeout(caller, timeout/2)
		defer cancel()
		if d := call(short, timeout/2); d.done == c.done || d.deadline != d.start.Add(timeout/2) {
			t.Errorf("with a caller's deadline %v: shared %v, deadline %v after the start", timeout/2, d.done == c.done, d.deadline.Sub(d.start))
		}
		long, cancel3 := context.WithTimeout(caller, 2*timeout)
		defer cancel3()
		if d := call(long, timeout); d.done != c.done {
			t.Errorf("with a caller's deadline %v: a context of its own, want the shared deadline", 2*timeout)
		}

		// A frozen server: the shared deadline ends the round trip with the
		// store's error.
		_, err = roundTrip(caller, s, func(ctx context.Context) (int, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		})
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no reply within 640ms") {
			t.Errorf("round trip past the deadline = %v, want the store's timeout", err)
		}

		canceled, cancel2 := context.WithCancel(caller)
		cancel2()
		ran := false
		_, err = roundTrip(canceled, s, func(context.Context) (int, error) { ran = true; return 0, nil })
		if !errors.Is(err, context.Canceled) || ran {
			t.Errorf("round trip on a canceled context = %v, ran %v; want context.Canceled without running", err, ran)
		}
	})
}

// A reservation's value is reservedTag and 26 base32 characters (as
// rand.Text) from the store's ChaCha8 seeded from crypto/rand, built in
// one allocation: with the owner token as its tail, Reserve no longer
// allocates the token and the value apart, nor makes a getrandom call.
func TestReservedValue(t *testing.T) {
	seen := map[string]bool{}
	o, o2 := newOwners(), newOwners()
	for range 1000 {
		v := o.reservedValue()
		if v == o2.reservedValue() {
			t.Fatalf("two stores drew the same owner token %q", v)
		}
		owner, ok := strings.CutPrefix(v, reservedTag)
		if !ok || len(owner) != ownerLen || strings.Trim(owner, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") != "" {
			t.Fatalf("reservedValue() = %q, want %q and %d base32 characters", v, reservedTag, ownerLen)
		}
		if seen[owner] {
			t.Fatalf("owner %q drawn twice", owner)
		}
		seen[owner] = true
	}
	if raceEnabled {
		return // the race detector adds allocations of its own
	}
	if n := testing.AllocsPerRun(100, func() { _ = o.reservedValue() }); n != 1 {
		t.Errorf("reservedValue allocates %v times, want 1", n)
	}
}
