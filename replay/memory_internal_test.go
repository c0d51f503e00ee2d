package replay

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

func TestNewMemoryDefaults(t *testing.T) {
	m := NewMemory(nil)
	if m.maxEntries != DefaultMaxEntries || m.lease != DefaultLease || m.now == nil {
		t.Fatalf("NewMemory(nil) = max %d, lease %v; want %d, %v and a clock", m.maxEntries, m.lease, DefaultMaxEntries, DefaultLease)
	}
}

// TestMemoryRandomOps drives a small store through random operations and
// checks after each one that the map and the deadline heap agree, and that
// every held claim is accounted for.
func TestMemoryRandomOps(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Unix(1_800_000_000, 0)
	m := NewMemory(&MemoryOptions{MaxEntries: 8, Lease: time.Minute, Now: func() time.Time { return now }})
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	var open []Reservation
	lifetimes := []time.Duration{time.Second, 30 * time.Second, 2 * time.Minute, time.Hour}
	steps := []time.Duration{0, time.Second, 20 * time.Second, time.Minute}

	for step := range 20000 {
		switch op := rng.IntN(4); {
		case op == 0 || len(open) == 0:
			exp := now.Add(lifetimes[rng.IntN(len(lifetimes))])
			r, err := m.Reserve(ctx, ids[rng.IntN(len(ids))], exp)
			switch {
			case err == nil:
				open = append(open, r)
			case !errors.Is(err, ErrReplayed) && !errors.Is(err, ErrFull):
				t.Fatalf("step %d: Reserve = %v", step, err)
			}
		case op == 1 || op == 2:
			i := rng.IntN(len(open))
			r := open[i]
			open = append(open[:i], open[i+1:]...)
			var err error
			if op == 1 {
				err = r.Commit(ctx)
			} else {
				err = r.Release(ctx)
			}
			if err != nil && !errors.Is(err, ErrReplayed) && !errors.Is(err, ErrFull) {
				t.Fatalf("step %d: Commit or Release = %v", step, err)
			}
		default:
			now = now.Add(steps[rng.IntN(len(steps))])
		}
		checkInvariants(t, m, step)
	}
}

func checkInvariants(t *testing.T, m *Memory, step int) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.queue) != len(m.entries) || len(m.entries) > m.maxEntries {
		t.Fatalf("step %d: %d entries, %d queued, max %d", step, len(m.entries), len(m.queue), m.maxEntries)
	}
	for i, sl := range m.queue {
		c := sl.c
		if c.index != i || m.entries[c.id] != c {
			t.Fatalf("step %d: queue[%d] = %q at index %d, not the map's entry", step, i, c.id, c.index)
		}
		if c.state != reserved && c.state != consumed {
			t.Fatalf("step %d: %q in state %d", step, c.id, c.state)
		}
		if c.state == consumed && !sl.deadline.Equal(c.expires) || sl.deadline.After(c.expires) {
			t.Fatalf("step %d: %q deadline %v past its expiry %v", step, c.id, sl.deadline, c.expires)
		}
		if i > 0 && sl.deadline.Before(m.queue[(i-1)/2].deadline) {
			t.Fatalf("step %d: heap order broken at %d", step, i)
		}
	}
}
