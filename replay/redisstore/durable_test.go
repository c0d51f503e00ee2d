package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mrtr-go/mrtr/internal/testing/testredis"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/replay/redisstore"
)

// A claim whose reply was lost, and which go-redis therefore sent again, is
// not counted as acknowledged: the WAIT of the copy sent again runs on
// another connection, which wrote nothing; from Redis 7.2 on, it answers at
// once with every replica, whether or not any replica holds the claim. Here the replica is
// frozen and holds nothing; the Reserve must fail closed and give the id
// back. (The mutation audit: a resent claim treated as acknowledged.)
func TestResentClaimUnconfirmed(t *testing.T) {
	t.Parallel()
	rs := testredis.StartReplicated(t, 1)
	link := testredis.StartCutLink(t, rs.Primary.Addr())
	prefix := newPrefix()
	// WAIT blocks for half the store's timeout, with the replica frozen:
	// go-redis must wait for it longer than its default 3 s read timeout,
	// or it sends the claim once more.
	store := newStore(t, "redis://"+link.Addr()+"/0?read_timeout=1m", &redisstore.Options{Prefix: prefix, Replicas: 1, Timeout: bound})
	raw := newClient(t, rs.Primary.URL())
	ctx := t.Context()
	exp := time.Now().Add(time.Hour)

	rs.Replicas[0].Pause()
	defer rs.Replicas[0].Resume()
	id := newID()
	lost := link.Cut(prefix + id)
	_, err := store.Reserve(ctx, id, exp)
	select {
	case <-lost:
	default:
		t.Fatalf("Reserve = %v, and the link lost no reply", err)
	}
	if err == nil || errors.Is(err, replay.ErrReplayed) || !strings.Contains(err.Error(), "sent twice") {
		t.Fatalf("Reserve whose claim was sent twice, the replica frozen = %v, want a store error saying the claim was sent twice", err)
	}
	if n := raw.Exists(ctx, prefix+id).Val(); n != 0 {
		t.Fatalf("the unconfirmed claim was not given back")
	}
}

// waitAOFReply is a go-redis hook that answers WAITAOF itself, with a
// reply set by the test, since Debian's Redis 7.0 has no WAITAOF: neither
// WAITAOF nor WAIT reaches the server. A WAIT the store reads is a bug (the
// store has switched to WAITAOF), so it fails.
type waitAOFReply struct {
	mu           sync.Mutex
	local, repls int64
	waits        int // WAITs the store sent
}

func (h *waitAOFReply) set(local, replicas int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.local, h.repls = local, replicas
}

func (*waitAOFReply) DialHook(next redis.DialHook) redis.DialHook { return next }

func (*waitAOFReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *waitAOFReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var sent, waits []redis.Cmder
		for _, c := range cmds {
			switch c.Name() {
			case "waitaof", "wait":
				waits = append(waits, c)
			default:
				sent = append(sent, c)
			}
		}
		err := next(ctx, sent)
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, c := range waits {
			c := c.(*redis.Cmd)
			if c.Name() == "wait" {
				h.waits++
				c.SetErr(errors.New("waitAOFReply: WAIT not sent"))
				continue
			}
			c.SetErr(nil)
			c.SetVal([]any{h.local, h.repls})
		}
		return err
	}
}

// WAITAOF 1 N answers [local, replicas]: the number of local AOFs (0 or 1)
// and of replicas that fsynced the write. A claim counts only if both
// reach what was asked: the primary's own AOF, and N replicas. (The
// mutation audit: WAITAOF's reply read from the wrong element.)
func TestWaitAOFReply(t *testing.T) {
	url := testredis.Start(t)
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	o.ContextTimeoutEnabled = true
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	h := &waitAOFReply{}
	c.AddHook(h)
	prefix := newPrefix()
	store := redisstore.New(c, &redisstore.Options{Prefix: prefix, Replicas: 2, Timeout: bound})
	raw := newClient(t, url)
	ctx := t.Context()
	exp := time.Now().Add(time.Hour)

	for _, tc := range []struct {
		local, replicas int64
		want            string // in the error; "" for none
	}{
		{1, 2, ""},
		{1, 3, ""},
		{1, 1, "1 of 2 replicas"},
		{1, 0, "0 of 2 replicas"},
		{0, 2, "primary"},
		{0, 0, "primary"},
	} {
		h.set(tc.local, tc.replicas)
		id := newID()
		r, err := store.Reserve(ctx, id, exp)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Reserve with WAITAOF answering [%d %d] = %v, want the claim", tc.local, tc.replicas, err)
		case tc.want != "" && (err == nil || errors.Is(err, replay.ErrReplayed) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Reserve with WAITAOF answering [%d %d] = %v, want a store error naming %q", tc.local, tc.replicas, err, tc.want)
		}
		if err != nil {
			if n := raw.Exists(ctx, prefix+id).Val(); n != 0 {
				t.Errorf("WAITAOF [%d %d]: the unacknowledged claim was not given back", tc.local, tc.replicas)
			}
			// A Commit of a claim held: it too needs both.
			if r, err = store.Reserve(ctx, id, exp); err == nil {
				t.Fatalf("Reserve again with WAITAOF answering [%d %d] succeeded", tc.local, tc.replicas)
			}
			h.set(1, 2)
			if r, err = store.Reserve(ctx, id, exp); err != nil {
				t.Fatal(err)
			}
			h.set(tc.local, tc.replicas)
			err = r.Commit(ctx)
			if err == nil || errors.Is(err, replay.ErrReplayed) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Commit with WAITAOF answering [%d %d] = %v, want a store error naming %q", tc.local, tc.replicas, err, tc.want)
			}
			h.set(1, 2)
		}
		if err := r.Commit(ctx); err != nil {
			t.Errorf("Commit with WAITAOF answering [1 2] = %v", err)
		}
	}
	if h.waits != 1 {
		t.Errorf("the store sent WAIT %d times, want once (before it knew WAITAOF)", h.waits)
	}
}
