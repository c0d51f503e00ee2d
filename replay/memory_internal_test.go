package replay

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestNewMemoryDefaults(t *testing.T) {
	m := NewMemory(nil)
	if m.maxEntries != DefaultMaxEntries || m.now == nil {
		t.Fatalf("NewMemory(nil) = max %d; want %d and a clock", m.maxEntries, DefaultMaxEntries)
	}
}

// TestMemoryRandomOps drives a small store through random operations and
// checks after each one that the index, the slots and the deadline heap
// agree, and that every reservation sees its own claim as it left it.
func TestMemoryRandomOps(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Unix(1_800_000_000, 0)
	m := NewMemory(&MemoryOptions{MaxEntries: 8, Now: func() time.Time { return now }})
	// Short and long ids, so that inline and hashed keys mix.
	ids := []string{"a", "b", "c", "d", "e", strings.Repeat("f", 23), strings.Repeat("g", 24), strings.Repeat("h", 40), strings.Repeat("h", 41), "j"}
	var open, committed []*memReservation
	lifetimes := []time.Duration{time.Second, 30 * time.Second, 2 * time.Minute, time.Hour}
	// A step back now and then, as from NTP, brings Commits to entries
	// dropped at their expiry.
	steps := []time.Duration{0, time.Second, 20 * time.Second, time.Minute, -time.Minute}

	for step := range 20000 {
		switch op := rng.IntN(4); {
		case op == 0 || len(open) == 0:
			exp := now.Add(lifetimes[rng.IntN(len(lifetimes))])
			r, err := m.Reserve(ctx, ids[rng.IntN(len(ids))], exp)
			switch {
			case err == nil:
				open = append(open, r.(*memReservation))
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
				committed = append(committed, r)
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
		for _, r := range open {
			if r.owns() {
				if e := m.entries[r.slot]; e.state != reserved || m.queue[e.pos].deadline != r.expires {
					t.Fatalf("step %d: open reservation's entry %+v, deadline %d, expiry %d", step, e, m.queue[e.pos].deadline, r.expires)
				}
			}
		}
		for _, r := range committed {
			if r.owns() {
				if e := m.entries[r.slot]; e.state != consumed || m.queue[e.pos].deadline != r.expires {
					t.Fatalf("step %d: committed reservation's entry %+v, deadline %d, expiry %d", step, e, m.queue[e.pos].deadline, r.expires)
				}
			}
		}
	}
}

func checkInvariants(t *testing.T, m *Memory, step int) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.queue) != len(m.index) || len(m.index) > m.maxEntries || len(m.queue)+len(m.free) != len(m.entries) {
		t.Fatalf("step %d: %d indexed, %d queued, %d free of %d slots, max %d", step, len(m.index), len(m.queue), len(m.free), len(m.entries), m.maxEntries)
	}
	for _, s := range m.free {
		if m.entries[s] != (entry{}) {
			t.Fatalf("step %d: free slot %d holds %+v", step, s, m.entries[s])
		}
	}
	for i, q := range m.queue {
		e := m.entries[q.slot]
		if int(e.pos) != i || m.index[e.key] != q.slot || e.gen == 0 || e.gen > m.gen {
			t.Fatalf("step %d: queue[%d] = slot %d holding %+v, not the index's entry", step, i, q.slot, e)
		}
		if e.state != reserved && e.state != consumed {
			t.Fatalf("step %d: slot %d in state %d", step, q.slot, e.state)
		}
		if i > 0 && q.deadline < m.queue[(i-1)/2].deadline {
			t.Fatalf("step %d: heap order broken at %d", step, i)
		}
	}
}

// TestKeyOf checks that distinct ids get distinct keys across the boundary
// between inline and hashed keys, including ids that differ only by trailing
// zero bytes or by length.
func TestKeyOf(t *testing.T) {
	ids := []string{"", "\x00", "\x00\x00", "a", "a\x00", strings.Repeat("x", keyInline-1), strings.Repeat("x", keyInline),
		strings.Repeat("x", keyInline+1), strings.Repeat("x", keyInline) + "\x00", strings.Repeat("x", 64), strings.Repeat("x", 65)}
	seen := make(map[memKey]string)
	for _, id := range ids {
		k := keyOf(id)
		if prev, ok := seen[k]; ok {
			t.Fatalf("keyOf(%q) == keyOf(%q)", id, prev)
		}
		seen[k] = id
		if k != keyOf(strings.Clone(id)) {
			t.Fatalf("keyOf(%q) is not deterministic", id)
		}
		if inline := len(id) <= keyInline; inline != (k[0] != keyHashed) {
			t.Fatalf("keyOf(%q)[0] = %#x", id, k[0])
		}
	}
}

// TestMemoryHoldsNoPointers guards what keeps a large store cheap for the
// garbage collector: nothing the store holds per id may contain a pointer.
func TestMemoryHoldsNoPointers(t *testing.T) {
	m := NewMemory(nil)
	for _, typ := range []reflect.Type{reflect.TypeOf(m.index), reflect.TypeOf(m.entries), reflect.TypeOf(m.free), reflect.TypeOf(m.queue)} {
		elems := []reflect.Type{typ.Elem()}
		if typ.Kind() == reflect.Map {
			elems = append(elems, typ.Key())
		}
		for _, e := range elems {
			if p := pointerPath(e); p != "" {
				t.Errorf("%v holds a pointer at %s", typ, p)
			}
		}
	}
}

// pointerPath returns where t holds a pointer, or "" if it holds none.
func pointerPath(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return ""
	case reflect.Array:
		if p := pointerPath(t.Elem()); p != "" {
			return "[]" + p
		}
		return ""
	case reflect.Struct:
		for i := range t.NumField() {
			if p := pointerPath(t.Field(i).Type); p != "" {
				return t.Field(i).Name + "." + p
			}
		}
		return ""
	}
	return t.String()
}

func TestUnixNanoSaturates(t *testing.T) {
	for _, c := range []struct {
		t    time.Time
		want int64
	}{
		{time.Unix(0, 0), 0},
		{time.Unix(1_800_000_000, 5), 1_800_000_000_000_000_005},
		{time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), math.MaxInt64},
		{time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), math.MinInt64},
		{time.Time{}, math.MinInt64},
	} {
		if got := unixNano(c.t); got != c.want {
			t.Errorf("unixNano(%v) = %d, want %d", c.t, got, c.want)
		}
	}
}

// TestMemoryFarFuture reserves and commits a token that expires past the
// int64 nanosecond range: its deadline saturates instead of wrapping around
// into the past.
func TestMemoryFarFuture(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(nil)
	far := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	r, err := m.Reserve(ctx, "far", far)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Reserve(ctx, "far", far); !errors.Is(err, ErrReplayed) {
		t.Fatalf("second Reserve = %v, want ErrReplayed", err)
	}
	if err := r.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Reserve(ctx, "far", far); !errors.Is(err, ErrReplayed) || m.Len() != 1 {
		t.Fatalf("Reserve after Commit = %v with %d held, want ErrReplayed with 1", err, m.Len())
	}
}
