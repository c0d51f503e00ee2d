package redisstore

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mrtr-go/mrtr/internal/testing/testredis"
)

// TestPXRoundsUp pins the mutation audit's "a key's PX rounded down so it
// can expire before its token" (issue 27): the lifetime a claim gets is
// the token's remaining life rounded up to Redis's whole milliseconds,
// never below it and less than a millisecond above.
func TestPXRoundsUp(t *testing.T) {
	now := time.Unix(1_800_000_000, 123_456_789)
	for _, d := range []time.Duration{
		time.Nanosecond, 400 * time.Microsecond, time.Millisecond - 1, time.Millisecond,
		time.Millisecond + 1, 2500 * time.Microsecond, time.Minute + 999_999, 5 * time.Minute,
		24*time.Hour + 1,
	} {
		px, ok := pxUntil(now.Add(d), now)
		if !ok {
			t.Fatalf("pxUntil(now+%v) refused", d)
		}
		if px < d || px >= d+time.Millisecond || px%time.Millisecond != 0 {
			t.Errorf("pxUntil(now+%v) = %v, want the whole milliseconds at or just above it", d, px)
		}
	}
	for _, d := range []time.Duration{0, -time.Nanosecond, -time.Hour} {
		if px, ok := pxUntil(now.Add(d), now); ok {
			t.Errorf("pxUntil(now%+v) = %v, true; want refused (expired)", d, px)
		}
	}
	// An expiry centuries away saturates; it still never rounds below.
	px, ok := pxUntil(time.Unix(math.MaxInt64/2, 0), now)
	if !ok || px < math.MaxInt64-time.Millisecond {
		t.Errorf("pxUntil(far future) = %v, %v", px, ok)
	}
}

// pxHook records the PX argument of every SET a client sends.
type pxHook struct {
	mu  sync.Mutex
	pxs []string
}

func (h *pxHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *pxHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); strings.EqualFold(cmd.Name(), "set") {
			for i := range len(args) - 1 {
				if s, ok := args[i].(string); ok && strings.EqualFold(s, "px") {
					h.mu.Lock()
					h.pxs = append(h.pxs, fmt.Sprint(args[i+1]))
					h.mu.Unlock()
				}
			}
		}
		return next(ctx, cmd)
	}
}

func (h *pxHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestReservePXRoundsUp: the claim Reserve makes on a real Redis lasts at
// least until the token's expiry, by the store's clock: 2.5 ms left is PX
// 3, and 0.4 ms left is PX 1 (rounded down, 0, Redis refuses).
func TestReservePXRoundsUp(t *testing.T) {
	url := testredis.Start(t)
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	hook := &pxHook{}
	c.AddHook(hook)
	now := time.Now()
	s := New(c, &Options{Prefix: "mrtr:test:px:" + fmt.Sprint(now.UnixNano()) + ":", Now: func() time.Time { return now }})
	for i, c := range []struct {
		left time.Duration
		px   string
	}{{2500 * time.Microsecond, "3"}, {400 * time.Microsecond, "1"}, {time.Hour, "3600000"}} {
		if _, err := s.Reserve(t.Context(), fmt.Sprintf("id-%d", i), now.Add(c.left)); err != nil {
			t.Fatalf("reserve with %v left: %v", c.left, err)
		}
		hook.mu.Lock()
		got := hook.pxs
		hook.mu.Unlock()
		if len(got) != i+1 || got[i] != c.px {
			t.Fatalf("with %v left the claims were SET with PX %v, want the last %s", c.left, got, c.px)
		}
	}
}
