package redisstore_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mrtr-go/mrtr/internal/testing/testredis"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/replay/redisstore"
	"github.com/mrtr-go/mrtr/replay/replaytest"
)

// The contract suite on Sentinel (one primary, two replicas, three
// sentinels) through the failover URL, without and with replica
// acknowledgments.
func TestContractSentinel(t *testing.T) {
	t.Parallel()
	ss := testredis.StartSentinel(t, 2, 3)
	raw := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: testredis.SentinelMaster, SentinelAddrs: []string{ss.Sentinels[1].Addr()}})
	t.Cleanup(func() { _ = raw.Close() })
	for _, replicas := range []int{0, 1, 2} {
		t.Run(replicaName(replicas), func(t *testing.T) {
			t.Parallel()
			runContract(t, raw, func(t *testing.T, opts *redisstore.Options) replay.Store {
				opts.Replicas = replicas
				opts.Timeout = ackTimeout
				return newStore(t, ss.URL(), opts)
			})
		})
	}
}

// The contract suite on a Cluster of three primaries with a replica each,
// through the redis-cluster:// URL, without and with replica
// acknowledgments.
func TestContractCluster(t *testing.T) {
	t.Parallel()
	cl := testredis.StartCluster(t, 3, 1)
	raw := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{cl.Nodes[0].Addr()}})
	t.Cleanup(func() { _ = raw.Close() })
	for _, replicas := range []int{0, 1} {
		t.Run(replicaName(replicas), func(t *testing.T) {
			t.Parallel()
			runContract(t, raw, func(t *testing.T, opts *redisstore.Options) replay.Store {
				opts.Replicas = replicas
				opts.Timeout = ackTimeout
				return newStore(t, cl.URL(), opts)
			})
		})
	}
	// Ids spread over every primary, and many clients race each one.
	store := newStore(t, cl.URL(), &redisstore.Options{Prefix: newPrefix(), Replicas: 1, Timeout: ackTimeout})
	exp := time.Now().Add(time.Hour)
	for range 20 {
		replaytest.RaceReserve(t, store, newID(), exp, 16)
	}
	d, err := store.Durability(t.Context())
	if err != nil || d.Primaries != 3 || d.Replicas != 1 || d.AOF {
		t.Fatalf("Durability = %+v, %v; want 3 primaries, 1 replica each, no AOF", d, err)
	}
}

// ackTimeout is the store timeout of tests whose claims must be
// acknowledged: replicas that share two busy cores with the rest of the
// test run (or a loaded machine) can take a while to answer WAIT (half
// of it): 1 s of WAIT was seen running out on a machine at load 12.
const ackTimeout = 5 * time.Second

func replicaName(n int) string {
	return "Replicas" + string(rune('0'+n))
}

// switchDialer is the address a client dials, which a test moves to another
// server the way a failover (or a virtual IP) moves a primary.
type switchDialer struct{ addr chan string }

func newSwitch(addr string) *switchDialer {
	s := &switchDialer{addr: make(chan string, 1)}
	s.addr <- addr
	return s
}

func (s *switchDialer) to(addr string) { <-s.addr; s.addr <- addr }

func (s *switchDialer) current() string { a := <-s.addr; s.addr <- a; return a }

// store returns a store whose client dials the current address.
func (s *switchDialer) store(t *testing.T, prefix string, replicas int) *redisstore.Store {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr: "switched",
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", s.current())
		},
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
	})
	t.Cleanup(func() { _ = c.Close() })
	return redisstore.New(c, &redisstore.Options{Prefix: prefix, Replicas: replicas, Timeout: ackTimeout})
}

// reserveAgain is a resume of id retried while the store cannot decide (a
// replica still catching up), as a client retries -32603: it returns nil if
// the id could be claimed again, ErrReplayed if not, or the last store
// error after a few seconds.
func reserveAgain(t *testing.T, store replay.Store, id string, exp time.Time) error {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := store.Reserve(t.Context(), id, exp)
		if err == nil || errors.Is(err, replay.ErrReplayed) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// detach makes a replica stop receiving the primary's writes while it keeps
// its data: it replicates from a port where nothing listens. It is a replica
// behind a network partition.
func detach(t *testing.T, replica *testredis.Server) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	defer c.Close()
	if err := c.Do(t.Context(), "REPLICAOF", "127.0.0.1", "1").Err(); err != nil {
		t.Fatal(err)
	}
}

// promote makes a replica a primary, as Sentinel or an operator does.
func promote(t *testing.T, replica *testredis.Server) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	defer c.Close()
	if err := c.Do(t.Context(), "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
}

// follow makes replica replicate from primary, as Sentinel reconfigures
// the other replicas after a failover, and waits until it is in sync: it
// then holds exactly what primary holds.
func follow(t *testing.T, replica, primary *testredis.Server) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	defer c.Close()
	host, port, _ := net.SplitHostPort(primary.Addr())
	if err := c.Do(t.Context(), "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	testredis.WaitReplicas(t, primary.Addr(), 1)
}

// Replicas=N makes a claim count only once N replicas hold it: a replica
// that cannot take the write makes Reserve and Commit fail closed, a
// Reserve refused so gives the id back, and everything works again once
// the replica is back.
func TestReplicasAcknowledge(t *testing.T) {
	t.Parallel()
	rs := testredis.StartReplicated(t, 1)
	ctx := t.Context()
	prefix := newPrefix()
	url := rs.Primary.URL()
	// one's claims that must be acknowledged get all the time they need
	// (WAIT returns as soon as the replica has answered); those that
	// cannot be, with the replica frozen, a short timeout. go-redis must
	// then wait for WAIT longer than its default 3 s read timeout.
	one := newStore(t, url+"?read_timeout=1m", &redisstore.Options{Prefix: prefix, Replicas: 1, Timeout: bound})
	two := newStore(t, url, &redisstore.Options{Prefix: prefix, Replicas: 2, Timeout: ackTimeout})
	zero := newStore(t, url, &redisstore.Options{Prefix: prefix, Timeout: bound})
	replica := newClient(t, rs.Replicas[0].URL())
	exp := time.Now().Add(time.Hour)

	// Acknowledged: when Reserve returns, the replica holds the claim.
	id := newID()
	r, err := one.Reserve(ctx, id, exp)
	if err != nil {
		t.Fatal(err)
	}
	if v := replica.Get(ctx, prefix+id).Val(); !strings.HasPrefix(v, "reserved:") {
		t.Fatalf("replica holds %q after an acknowledged Reserve, want reserved:<owner>", v)
	}
	if err := r.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if v := replica.Get(ctx, prefix+id).Val(); !strings.HasPrefix(v, "consumed:") {
		t.Fatalf("replica holds %q after an acknowledged Commit, want consumed:<owner>", v)
	}

	// More replicas required than there are: every claim fails closed, and
	// gives the id back.
	// (How many of the two did within WAIT's timeout depends on how fast
	// the one replica answers on a busy machine: 0 or 1.)
	id = newID()
	if _, err := two.Reserve(ctx, id, exp); err == nil || errors.Is(err, replay.ErrReplayed) ||
		!(strings.Contains(err.Error(), ": 1 of 2 replicas") || strings.Contains(err.Error(), ": 0 of 2 replicas")) {
		t.Fatalf("Reserve with 2 required and 1 replica = %v, want a store error naming fewer than 2 of 2 replicas", err)
	}
	if _, err := zero.Reserve(ctx, id, exp); err != nil {
		t.Fatalf("Reserve after an unacknowledged claim = %v, want the id free again", err)
	}

	// The replica stops taking writes: a claim fails closed with 1
	// required, and succeeds (unprotected) with 0.
	held, err := one.Reserve(ctx, newID(), exp)
	if err != nil {
		t.Fatal(err)
	}
	rs.Replicas[0].Pause()
	redisstore.SetTimeout(one, ackTimeout)
	id = newID()
	err = failsClosed(t, "Reserve with the replica frozen", func() error { _, err := one.Reserve(ctx, id, exp); return err })
	if !strings.Contains(err.Error(), "0 of 1 replicas") {
		t.Errorf("Reserve with the replica frozen = %v, want 0 of 1 replicas", err)
	}
	failsClosed(t, "Commit with the replica frozen", func() error { return held.Commit(ctx) })
	if _, err := zero.Reserve(ctx, newID(), exp); err != nil {
		t.Fatalf("Reserve with 0 required and the replica frozen = %v", err)
	}
	rs.Replicas[0].Resume()
	redisstore.SetTimeout(one, bound)
	if _, err := one.Reserve(ctx, id, exp); err != nil {
		t.Fatalf("Reserve once the replica is back = %v", err)
	}
	if err := held.Commit(ctx); err != nil {
		t.Fatalf("Commit retried once the replica is back = %v", err)
	}
	if _, err := zero.Reserve(ctx, id, exp); !errors.Is(err, replay.ErrReplayed) {
		t.Fatalf("Reserve of a claimed id = %v", err)
	}
}

// The failover windows: which settings close which way of losing a claim.
// Each subtest claims an id, loses the primary in one way, and tries the
// id again on the server that takes over. "ran twice" is a second Reserve
// that succeeds: a second run of the handler.
func TestFailoverWindows(t *testing.T) {
	t.Parallel()
	exp := time.Now().Add(time.Hour)

	// A primary whose replica is cut off (a partition) keeps taking
	// writes; the replica is promoted without them. Replicas=0 lets the
	// token run on both sides; Replicas=1 refuses the claim that no
	// replica holds.
	t.Run("IsolatedPrimary", func(t *testing.T) {
		t.Parallel()
		for _, replicas := range []int{0, 1} {
			rs := testredis.StartReplicated(t, 1)
			sw := newSwitch(rs.Primary.Addr())
			prefix := newPrefix()
			store := sw.store(t, prefix, replicas)
			id := newID()
			detach(t, rs.Replicas[0])
			_, err := store.Reserve(t.Context(), id, exp)
			rs.Primary.Kill()
			promote(t, rs.Replicas[0])
			sw.to(rs.Replicas[0].Addr())
			_, again := store.Reserve(t.Context(), id, exp)
			switch {
			case replicas == 0 && (err != nil || again != nil):
				t.Errorf("Replicas=0: first %v, after failover %v; want both to succeed (the window the option closes)", err, again)
			case replicas == 1 && (err == nil || errors.Is(err, replay.ErrReplayed)):
				t.Errorf("Replicas=1: a claim no replica holds = %v, want a store error", err)
			}
			t.Logf("Replicas=%d: claim on the isolated primary: %v; same id after failover: %v", replicas, err, again)
		}
	})

	// Two replicas, one of them cut off. Replicas=1 is satisfied by the
	// other; if the cut-off one is promoted (the one that acknowledged
	// is down too, or Sentinel's view of the offsets is stale) and the
	// other follows it (a full resync drops what it had), the token runs
	// again. Replicas=2 (every replica) refuses the claim.
	t.Run("LaggingReplicaPromoted", func(t *testing.T) {
		t.Parallel()
		for _, replicas := range []int{1, 2} {
			rs := testredis.StartReplicated(t, 2)
			sw := newSwitch(rs.Primary.Addr())
			store := sw.store(t, newPrefix(), replicas)
			id := newID()
			detach(t, rs.Replicas[1])
			_, err := store.Reserve(t.Context(), id, exp)
			rs.Primary.Kill()
			promote(t, rs.Replicas[1])
			follow(t, rs.Replicas[0], rs.Replicas[1])
			sw.to(rs.Replicas[1].Addr())
			var again error
			if replicas == 1 {
				again = reserveAgain(t, store, id, exp)
			} else {
				_, again = store.Reserve(t.Context(), id, exp)
			}
			switch {
			case replicas == 1 && (err != nil || again != nil):
				t.Errorf("Replicas=1 of 2: first %v, after promoting the lagging replica %v; want both to succeed (a window Replicas=1 leaves open)", err, again)
			case replicas == 2 && (err == nil || errors.Is(err, replay.ErrReplayed)):
				t.Errorf("Replicas=2 of 2 with one cut off = %v, want a store error", err)
			}
			t.Logf("Replicas=%d of 2: claim: %v; same id on the promoted lagging replica: %v", replicas, err, again)
		}
	})

	// The primary crashes and is restarted at once, before any failover,
	// with no persistence: it comes back empty and its replica, which had
	// acknowledged the claim, resynchronizes from it and drops it too.
	// No number of acknowledgments helps; appendonly yes does (the
	// restarted primary reloads its log).
	t.Run("PrimaryRestartedEmpty", func(t *testing.T) {
		t.Parallel()
		for _, aof := range []bool{false, true} {
			var args []string
			if aof {
				args = []string{"--appendonly", "yes", "--appendfsync", "everysec"}
			}
			rs := testredis.StartReplicated(t, 1, args...)
			store := newStore(t, rs.Primary.URL(), &redisstore.Options{Prefix: newPrefix(), Replicas: 1, Timeout: ackTimeout})
			id := newID()
			r, err := store.Reserve(t.Context(), id, exp)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Commit(t.Context()); err != nil {
				t.Fatal(err)
			}
			rs.Primary.Kill()
			rs.Primary.Start()
			testredis.WaitReplicas(t, rs.Primary.Addr(), 1)
			var again error
			eventually(t, "Reserve after the restart", func() error {
				_, again = store.Reserve(t.Context(), id, exp)
				if errors.Is(again, replay.ErrReplayed) {
					return nil
				}
				return again
			})
			switch {
			case !aof && again != nil:
				t.Errorf("appendonly no: same id after the restart = %v; want it to run again (the window WAIT cannot close)", again)
			case aof && !errors.Is(again, replay.ErrReplayed):
				t.Errorf("appendonly yes: same id after the restart = %v, want ErrReplayed", again)
			}
			t.Logf("appendonly %v, Replicas=1: same id after kill -9 and restart: %v", aof, again)
		}
	})

	// A reservation acknowledged before the failover is settled after it
	// on the promoted replica: Commit consumes the id there, Release frees
	// it.
	t.Run("SettleAfterFailover", func(t *testing.T) {
		t.Parallel()
		rs := testredis.StartReplicated(t, 2)
		sw := newSwitch(rs.Primary.Addr())
		store := sw.store(t, newPrefix(), 1)
		committed, released := newID(), newID()
		rc, err := store.Reserve(t.Context(), committed, exp)
		if err != nil {
			t.Fatal(err)
		}
		rr, err := store.Reserve(t.Context(), released, exp)
		if err != nil {
			t.Fatal(err)
		}
		rs.Primary.Kill()
		promote(t, rs.Replicas[0])
		sw.to(rs.Replicas[0].Addr())
		// Until the other replica follows the new primary, a Commit that
		// needs an acknowledgment fails closed; the id stays reserved.
		if err := rc.Commit(t.Context()); err == nil {
			t.Fatal("Commit with no replica following the new primary succeeded")
		}
		follow(t, rs.Replicas[1], rs.Replicas[0])
		if err := rc.Commit(t.Context()); err != nil {
			t.Fatalf("Commit after the failover = %v", err)
		}
		if _, err := store.Reserve(t.Context(), committed, exp); !errors.Is(err, replay.ErrReplayed) {
			t.Fatalf("Reserve of an id committed after the failover = %v, want ErrReplayed", err)
		}
		if err := rr.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Reserve(t.Context(), released, exp); err != nil {
			t.Fatalf("Reserve of an id released after the failover = %v, want it free", err)
		}
	})
}

// After a Cluster failover, the cluster client's slot map still names the
// old primary until it reloads it. With Replicas above zero the store sends
// each claim to the key's primary itself; when the old primary is back as a
// replica and answers MOVED, the claim goes to the node the reply names.
func TestClusterMovedAfterFailover(t *testing.T) {
	t.Parallel()
	cl := testredis.StartCluster(t, 3, 1)
	store := newStore(t, cl.URL(), &redisstore.Options{Prefix: newPrefix(), Replicas: 1, Timeout: ackTimeout})
	exp := time.Now().Add(time.Hour)
	ids := make([]string, 64) // every primary holds some
	for i := range ids {
		ids[i] = newID()
		if _, err := store.Reserve(t.Context(), ids[i], exp); err != nil {
			t.Fatal(err)
		}
	}
	old := cl.Primaries(t)[0]
	old.Kill()
	cl.WaitOK(t) // its replica took its slots over
	old.Start()  // and it rejoins as that replica's replica
	cl.WaitOK(t)
	for range 64 {
		if _, err := store.Reserve(t.Context(), newID(), exp); err != nil {
			t.Fatalf("Reserve after the failover = %v, want the claim sent to the new primary", err)
		}
	}
	// The claims from before the failover held: every one was
	// acknowledged by the replica that took over.
	for _, id := range ids {
		if _, err := store.Reserve(t.Context(), id, exp); !errors.Is(err, replay.ErrReplayed) {
			t.Fatalf("Reserve of an id claimed before the failover = %v, want ErrReplayed", err)
		}
	}
}

// BenchmarkResume is the store's share of one resume (Reserve, then Commit)
// on each deployment, one at a time: what --replay-replicas costs in
// latency and in Redis round trips. The numbers of docs/OPERATIONS.md come
// from
//
//	go test ./replay/redisstore -run '^$' -bench Resume -benchtime 3000x
func BenchmarkResume(b *testing.B) {
	single := testredis.StartReplicated(b, 0)
	ss := testredis.StartSentinel(b, 2, 3)
	cl := testredis.StartCluster(b, 3, 1)
	for _, tc := range []struct {
		name     string
		url      string
		replicas int
	}{
		{"OneRedis", single.Primary.URL(), 0},
		{"Sentinel/Replicas0", ss.URL(), 0},
		{"Sentinel/Replicas1", ss.URL(), 1},
		{"Sentinel/Replicas2", ss.URL(), 2},
		{"Cluster/Replicas0", cl.URL(), 0},
		{"Cluster/Replicas1", cl.URL(), 1},
	} {
		b.Run(tc.name, func(b *testing.B) {
			store, err := redisstore.NewFromURL(tc.url, &redisstore.Options{Prefix: newPrefix(), Replicas: tc.replicas, Timeout: 2 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			ctx := context.Background()
			exp := time.Now().Add(time.Hour)
			ids := make([]string, b.N)
			for i := range ids {
				ids[i] = newID()
			}
			// Warm up: connections, the script cache, the slot map.
			for range 20 {
				r, err := store.Reserve(ctx, newID(), exp)
				if err == nil {
					err = r.Commit(ctx)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				r, err := store.Reserve(ctx, ids[i], exp)
				if err != nil {
					b.Fatal(err)
				}
				if err := r.Commit(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
