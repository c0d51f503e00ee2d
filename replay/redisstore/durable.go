package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mrtr-go/mrtr/replay"
)

// How the primary acknowledges a write to replicas, found on first use.
const (
	ackUnknown int32 = iota // try WAITAOF, fall back to WAIT
	ackWait                 // WAIT numreplicas timeout
	ackWaitAOF              // WAITAOF 1 numreplicas timeout (Redis 7.2+, appendonly yes)
)

// errUnconfirmed is the cause when go-redis resent a Reserve whose first
// copy claimed the id: the resent WAIT ran on another connection, so it says
// nothing about the first copy's write.
var errUnconfirmed = errors.New("the claim was sent twice (a lost reply); whether replicas acknowledged it is unknown")

// primaryFor returns a client of the primary that holds key. A write and the
// WAIT after it must go over one connection (WAIT waits for that
// connection's writes), so they go as one pipeline through this client.
func (s *Store) primaryFor(ctx context.Context, key string) (*redis.Client, error) {
	switch c := s.client.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	}
	return nil, fmt.Errorf("Options.Replicas needs a *redis.Client or a *redis.ClusterClient, not %T", s.client)
}

// pipelineAcked sends the commands queue adds to key's primary, followed by
// WAIT (or WAITAOF), in one pipeline. The commands keep their own results
// and errors. It returns how many replicas acknowledged them, or why that is
// not known.
//
// In a Cluster, the primary comes from the cluster client's slot map, which
// lags a failover. A MOVED reply names the primary that holds the slot now:
// the pipeline is sent there once more (a MOVED means the node ran nothing),
// and the cluster client reloads its map for the next call.
func (s *Store) pipelineAcked(ctx context.Context, key string, queue func(redis.Pipeliner)) (acks int, err error) {
	c, err := s.primaryFor(ctx, key)
	if err != nil {
		return 0, err
	}
	for try := 0; ; try++ {
		cmds, acks, err := s.pipelineOn(ctx, c, queue)
		cc, cluster := s.client.(*redis.ClusterClient)
		if !cluster {
			return acks, err
		}
		moved := ""
		for _, cmd := range cmds {
			if e := cmd.Err(); e != nil && !errors.Is(e, redis.Nil) {
				// A MOVED, a CLUSTERDOWN or a dead node: the slot map
				// changes (a failover). Have the cluster client load
				// it again, in the background; go-redis does so itself
				// for the commands it routes.
				cc.ReloadState(ctx)
				if f := strings.Fields(e.Error()); len(f) == 3 && f[0] == "MOVED" && moved == "" {
					moved = f[2]
				}
			}
		}
		if moved == "" || try > 0 {
			return acks, err
		}
		c = s.redirect(cc, moved)
	}
}

// pipelineOn runs queue's commands and the acknowledgment on c.
func (s *Store) pipelineOn(ctx context.Context, c *redis.Client, queue func(redis.Pipeliner)) ([]redis.Cmder, int, error) {
	mode := s.ackMode.Load()
	p := c.Pipeline()
	queue(p)
	var waitAOF, wait *redis.Cmd
	if mode != ackWait {
		waitAOF = p.Do(ctx, "WAITAOF", 1, s.replicas, s.waitMS)
	}
	if mode != ackWaitAOF {
		wait = p.Do(ctx, "WAIT", s.replicas, s.waitMS)
	}
	cmds, _ := p.Exec(ctx) // each command's error is in the command
	if waitAOF != nil {
		switch v, err := waitAOF.Int64Slice(); {
		case err == nil && len(v) == 2:
			// [local, replicas]: the primary's own AOF (0 or 1) and
			// the replicas that fsynced the write. WAITAOF 1 asked for
			// the primary's too: a primary that restarts before a
			// failover reloads its AOF, and its replicas resync from it.
			s.ackMode.CompareAndSwap(ackUnknown, ackWaitAOF)
			if v[0] < 1 {
				return cmds, 0, fmt.Errorf("WAITAOF: the primary did not fsync the write to its AOF within %dms", s.waitMS)
			}
			return cmds, int(v[1]), nil
		case err == nil:
			return cmds, 0, fmt.Errorf("WAITAOF answered %v", v)
		case noWaitAOF(err):
			if mode == ackWaitAOF {
				// The primary changed (a failover, a CONFIG SET):
				// find out again on the next call, and fail this one.
				s.ackMode.CompareAndSwap(ackWaitAOF, ackUnknown)
				return cmds, 0, fmt.Errorf("WAITAOF: %w", err)
			}
			s.ackMode.CompareAndSwap(ackUnknown, ackWait)
		default:
			return cmds, 0, fmt.Errorf("WAITAOF: %w", err)
		}
	}
	n, err := wait.Int64()
	if err != nil {
		return cmds, 0, fmt.Errorf("WAIT: %w", err)
	}
	return cmds, int(n), nil
}

// redirect returns a client of the Cluster node at addr, configured like
// the cluster client's own node clients, made once and closed with the
// store.
func (s *Store) redirect(cc *redis.ClusterClient, addr string) *redis.Client {
	s.redirectMu.Lock()
	defer s.redirectMu.Unlock()
	if c, ok := s.redirects[addr]; ok {
		return c
	}
	o := cc.Options()
	c := redis.NewClient(&redis.Options{
		Addr: addr, Protocol: o.Protocol, ClientName: o.ClientName, Dialer: o.Dialer,
		Username: o.Username, Password: o.Password, CredentialsProvider: o.CredentialsProvider,
		TLSConfig: o.TLSConfig, DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: 4,
	})
	if s.redirects == nil {
		s.redirects = map[string]*redis.Client{}
	}
	s.redirects[addr] = c
	return c
}

func (s *Store) closeRedirects() {
	s.redirectMu.Lock()
	defer s.redirectMu.Unlock()
	for _, c := range s.redirects {
		_ = c.Close()
	}
	s.redirects = nil
}

// noWaitAOF reports whether the server cannot run WAITAOF: it predates Redis
// 7.2, or has appendonly no.
func noWaitAOF(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "unknown command") || strings.Contains(msg, "appendonly")
}

// ackShort is the error of a write that fewer replicas than required
// acknowledged.
func (s *Store) ackShort(acks int) error {
	return fmt.Errorf("%d of %d replicas acknowledged within %dms", acks, s.replicas, s.waitMS)
}

// reserveAcked is Reserve with Options.Replicas above zero: the claim, a
// read of the key (to recognize a claim resent by go-redis) and the
// acknowledgment go in one pipeline.
func (s *Store) reserveAcked(ctx context.Context, r *reservation, px time.Duration) (replay.Reservation, error) {
	val := r.val
	type outcome struct {
		won, own bool
		acks     int
		ackErr   error
	}
	o, err := roundTrip(ctx, s, func(ctx context.Context) (outcome, error) {
		var set *redis.StatusCmd
		var get *redis.StringCmd
		acks, ackErr := s.pipelineAcked(ctx, r.key, func(p redis.Pipeliner) {
			set = p.SetArgs(ctx, r.key, val, redis.SetArgs{Mode: "NX", TTL: px})
			get = p.Get(ctx, r.key)
		})
		if set == nil { // no primary to send to
			return outcome{}, ackErr
		}
		switch err := set.Err(); {
		case err == nil:
			return outcome{won: true, acks: acks, ackErr: ackErr}, nil
		case !errors.Is(err, redis.Nil):
			return outcome{}, err
		}
		cur, err := get.Result()
		switch {
		case errors.Is(err, redis.Nil):
			return outcome{}, nil // held a moment ago, by someone else
		case err != nil:
			return outcome{}, err
		}
		return outcome{own: cur == val}, nil
	})
	var cause error
	switch {
	case err != nil:
		return nil, fmt.Errorf("redisstore: reserve: %w", err)
	case o.own:
		cause = errUnconfirmed
	case !o.won:
		return nil, replay.ErrReplayed
	case o.ackErr != nil:
		cause = o.ackErr
	case o.acks < s.replicas:
		cause = s.ackShort(o.acks)
	default:
		return r, nil
	}
	// No handler runs on this claim: give the id back, so that the user
	// can try again once the replicas are back. If the Release is lost,
	// the id stays claimed until it expires, which is safe.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	_ = r.Release(rctx)
	cancel()
	return nil, fmt.Errorf("redisstore: reserve: claim not acknowledged by replicas: %w", cause)
}

// commitAcked runs the commit script and the acknowledgment in one
// pipeline. It returns what the script returned, and an error if it failed
// or, for a consumed id, too few replicas acknowledged it.
func (s *Store) commitAcked(ctx context.Context, r *reservation, px time.Duration) (int64, error) {
	return roundTrip(ctx, s, func(ctx context.Context) (int64, error) {
		run := func(eval bool) (*redis.Cmd, int, error) {
			var cmd *redis.Cmd
			acks, err := s.pipelineAcked(ctx, r.key, func(p redis.Pipeliner) {
				if eval {
					cmd = commitScript.Eval(ctx, p, []string{r.key}, r.owner, px.Milliseconds())
				} else {
					cmd = commitScript.EvalSha(ctx, p, []string{r.key}, r.owner, px.Milliseconds())
				}
			})
			return cmd, acks, err
		}
		cmd, acks, ackErr := run(false)
		if cmd != nil && redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			cmd, acks, ackErr = run(true) // a restarted or new primary
		}
		if cmd == nil {
			return 0, ackErr
		}
		n, err := cmd.Int64()
		switch {
		case err != nil:
			return 0, err
		case n != 0:
			return n, nil // not ours to consume: nothing of ours to confirm
		case ackErr != nil:
			return 0, fmt.Errorf("not acknowledged by replicas: %w", ackErr)
		case acks < s.replicas:
			return 0, fmt.Errorf("not acknowledged by replicas: %w", s.ackShort(acks))
		}
		return 0, nil
	})
}

// Durability is what the Redis behind a Store keeps of its claims across a
// restart or a failover, as the servers report it (INFO).
type Durability struct {
	// Primaries is how many primaries answered: 1, or each primary of a
	// Cluster.
	Primaries int

	// AOF reports that every primary has appendonly yes: a restart
	// reloads the claims it had written to its log.
	AOF bool

	// Replicas is the fewest replicas connected to any primary: a
	// failover can promote one of them.
	Replicas int
}

// Durability asks every primary the store writes to (INFO) whether it
// persists its data to an append-only file and how many replicas it has. It
// is meant for a startup check; it is one INFO per primary and needs neither
// CONFIG nor any write.
func (s *Store) Durability(ctx context.Context) (Durability, error) {
	d, err := roundTrip(ctx, s, func(ctx context.Context) (Durability, error) {
		d := Durability{AOF: true, Replicas: -1}
		var mu sync.Mutex
		add := func(ctx context.Context, c *redis.Client) error {
			info, err := c.Info(ctx).Result()
			if err != nil {
				return err
			}
			aof, replicas, err := parseDurability(info)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			d.Primaries++
			d.AOF = d.AOF && aof
			if d.Replicas < 0 || replicas < d.Replicas {
				d.Replicas = replicas
			}
			return nil
		}
		var err error
		switch c := s.client.(type) {
		case *redis.ClusterClient:
			err = c.ForEachMaster(ctx, add)
		case *redis.Client:
			err = add(ctx, c)
		default:
			err = fmt.Errorf("cannot inspect a %T", s.client)
		}
		if err == nil && d.Primaries == 0 {
			err = errors.New("no primary answered")
		}
		return d, err
	})
	if err != nil {
		return Durability{}, fmt.Errorf("redisstore: durability: %w", err)
	}
	return d, nil
}

// parseDurability reads aof_enabled and connected_slaves from INFO.
func parseDurability(info string) (aof bool, replicas int, err error) {
	var seenAOF, seenReplicas bool
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "aof_enabled":
			aof, seenAOF = v == "1", true
		case "connected_slaves":
			replicas, err = strconv.Atoi(v)
			if err != nil {
				return false, 0, fmt.Errorf("INFO connected_slaves %q", v)
			}
			seenReplicas = true
		}
	}
	if !seenAOF || !seenReplicas {
		return false, 0, errors.New("INFO has no aof_enabled or connected_slaves")
	}
	return aof, replicas, nil
}
