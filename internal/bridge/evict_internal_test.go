package bridge

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestEvictByCaller: Bridge.evict with a caller filter, what
// --max-procs-per-caller (a later issue) builds on, takes the least
// recently used idle session of that caller only, and nothing when the
// caller has none.
func TestEvictByCaller(t *testing.T) {
	var tick atomic.Int64 // each reading of the clock a second later
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	sc := &script{}
	b := New(Options{Dial: sc.dial, MaxSessions: 4, Now: func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Second) }})
	defer b.Close(context.Background())
	ctx := context.Background()
	var ss []*session
	for _, c := range []string{"a", "b", "a"} { // children 0, 1, 2
		s, err := b.acquire(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	for _, s := range ss { // released in order: child 0 is the least recently used
		b.release(s)
	}
	only := func(c string) func(string) bool { return func(x string) bool { return x == c } }
	evict := func(of func(string) bool) bool {
		b.mu.Lock()
		stop := b.evict(of)
		b.mu.Unlock()
		if stop == nil {
			return false
		}
		return stop(ctx) == nil
	}
	closed := func() (out []bool) {
		for i := range 3 {
			select {
			case <-sc.child(i).closed:
				out = append(out, true)
			default:
				out = append(out, false)
			}
		}
		return out
	}
	if !evict(only("b")) || closed()[1] != true || closed()[0] || closed()[2] {
		t.Fatalf("evicting b's: children stopped %v, want only 1", closed())
	}
	if evict(only("b")) || evict(only("c")) {
		t.Fatal("evicted a session of a caller that has none idle")
	}
	if !evict(only("a")) || !closed()[0] || closed()[2] {
		t.Fatalf("evicting a's: children stopped %v, want 0 (the least recently used) and 1", closed())
	}
	if st := b.Stats(); st.Sessions != 1 || st.Idle != 1 {
		t.Fatalf("after two evictions: %+v", st)
	}
}
