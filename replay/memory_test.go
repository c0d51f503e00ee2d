package replay_test

import (
	"context"
	"errors"
	"math"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/testing/fakeclock"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/replay/replaytest"
)

func newFakeClock() *fakeclock.Clock {
	return fakeclock.New(time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC))
}

var _ replay.NonBlocking = (*replay.Memory)(nil)

func TestMemoryContract(t *testing.T) {
	replaytest.Run(t, func(t *testing.T) replaytest.Fixture {
		clk := newFakeClock()
		return replaytest.Fixture{
			Store:   replay.NewMemory(&replay.MemoryOptions{Now: clk.Now}),
			Now:     clk.Now,
			Advance: clk.Advance,
		}
	})
}

// newMemory returns a store on a fake clock.
func newMemory(maxEntries int) (*replay.Memory, *fakeclock.Clock) {
	clk := newFakeClock()
	m := replay.NewMemory(&replay.MemoryOptions{MaxEntries: maxEntries, Now: clk.Now})
	return m, clk
}

func reserve(t *testing.T, s replay.Store, id string, expires time.Time, want error) replay.Reservation {
	t.Helper()
	r, err := s.Reserve(context.Background(), id, expires)
	if !errors.Is(err, want) {
		t.Fatalf("Reserve(%q) = %v, want %v", id, err, want)
	}
	return r
}

func wantLen(t *testing.T, m *replay.Memory, want int) {
	t.Helper()
	if got := m.Len(); got != want {
		t.Fatalf("Len = %d, want %d", got, want)
	}
}

func TestMemoryFull(t *testing.T) {
	ctx := context.Background()
	m, clk := newMemory(2)
	exp := clk.Now().Add(time.Hour)

	a := reserve(t, m, "a", exp, nil)
	b := reserve(t, m, "b", exp, nil)
	reserve(t, m, "c", exp, replay.ErrFull)
	if err := a.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	reserve(t, m, "c", exp, replay.ErrFull) // a consumed id still takes room
	reserve(t, m, "a", exp, replay.ErrReplayed)
	clk.Advance(30 * time.Minute)
	reserve(t, m, "c", exp, replay.ErrFull) // so does a reservation, however old

	if err := b.Release(ctx); err != nil { // b's handler failed; a stays consumed
		t.Fatal(err)
	}
	reserve(t, m, "c", exp, nil)
	reserve(t, m, "d", exp, replay.ErrFull)
	wantLen(t, m, 2)

	clk.Advance(time.Hour) // every token has expired
	reserve(t, m, "d", clk.Now().Add(time.Hour), nil)
	wantLen(t, m, 1)
}

// Eviction is amortized over calls, yet a store full of expired entries takes
// a new entry on every call.
func TestMemoryEvictsExpired(t *testing.T) {
	const n = 1000
	m, clk := newMemory(n)
	soon, later := clk.Now().Add(time.Second), clk.Now().Add(time.Hour)
	for i := range n {
		reserve(t, m, "old"+strconv.Itoa(i), soon, nil)
	}
	reserve(t, m, "extra", later, replay.ErrFull)
	clk.Advance(time.Second)
	for i := range n {
		reserve(t, m, "new"+strconv.Itoa(i), later, nil)
	}
	reserve(t, m, "extra", later, replay.ErrFull)
	wantLen(t, m, n)
}

func TestMemoryLen(t *testing.T) {
	ctx := context.Background()
	m, clk := newMemory(0)
	exp := clk.Now().Add(time.Hour)
	wantLen(t, m, 0)

	r := reserve(t, m, "a", exp, nil)
	wantLen(t, m, 1)
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wantLen(t, m, 0)

	if err := reserve(t, m, "a", exp, nil).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	reserve(t, m, "b", clk.Now().Add(time.Minute), nil)
	wantLen(t, m, 2)
	clk.Advance(time.Minute) // b's token expires, never settled
	wantLen(t, m, 1)
	clk.Advance(time.Hour) // a's token expires
	wantLen(t, m, 0)
}

// A reservation and a consumed id are both held until exactly the token's
// expiry, however long the handler takes and whether or not Commit comes.
func TestMemoryDeadlines(t *testing.T) {
	ctx := context.Background()
	m, clk := newMemory(0)
	start := clk.Now()

	reserve(t, m, "held", start.Add(time.Hour), nil)
	reserve(t, m, "short", start.Add(time.Second), nil)
	c := reserve(t, m, "consumed", start.Add(time.Hour), nil)
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	clk.Advance(time.Second - 1)
	reserve(t, m, "short", start.Add(time.Hour), replay.ErrReplayed)
	clk.Advance(1)
	reserve(t, m, "short", start.Add(time.Hour), nil)

	clk.Advance(time.Hour - time.Second - 1)
	reserve(t, m, "held", start.Add(2*time.Hour), replay.ErrReplayed)
	reserve(t, m, "consumed", start.Add(2*time.Hour), replay.ErrReplayed)
	clk.Advance(1)
	reserve(t, m, "held", start.Add(2*time.Hour), nil)
	reserve(t, m, "consumed", start.Add(2*time.Hour), nil)

	reserve(t, m, "expired", clk.Now(), replay.ErrReplayed)
}

// The two-minute lease of earlier versions is gone: a reservation held
// past it still excludes every other Reserve (issue 9, item 2).
func TestMemoryNoLease(t *testing.T) {
	m, clk := newMemory(0)
	exp := clk.Now().Add(5 * time.Minute)
	reserve(t, m, "a", exp, nil)
	clk.Advance(2*time.Minute + time.Second)
	reserve(t, m, "a", exp, replay.ErrReplayed)
}

func TestNewMemoryNil(t *testing.T) {
	m := replay.NewMemory(nil)
	r := reserve(t, m, "a", time.Now().Add(time.Hour), nil)
	if err := r.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	reserve(t, m, "a", time.Now().Add(time.Hour), replay.ErrReplayed)
}

func TestNewMemoryPanics(t *testing.T) {
	huge := math.MaxInt32
	huge++ // computed, so that the test builds where int has 32 bits
	for name, opts := range map[string]*replay.MemoryOptions{
		"negative MaxEntries": {MaxEntries: -1},
		"huge MaxEntries":     {MaxEntries: huge},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("NewMemory with a %s did not panic", name)
				}
			}()
			replay.NewMemory(opts)
		})
	}
}

// Memory does no I/O, so Commit and Release take effect even when the
// request's context was canceled: a disconnecting client must not be able to
// make the Commit fail.
func TestMemoryIgnoresContextAfterReserve(t *testing.T) {
	m, clk := newMemory(0)
	exp := clk.Now().Add(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	a := reserve(t, m, "a", exp, nil)
	b := reserve(t, m, "b", exp, nil)
	cancel()
	if err := a.Commit(ctx); err != nil {
		t.Fatalf("Commit with a canceled context = %v", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatalf("Release with a canceled context = %v", err)
	}
	clk.Advance(time.Hour - 1)
	reserve(t, m, "a", exp, replay.ErrReplayed)
	reserve(t, m, "b", exp, nil)
}

// A clock stepped back after a reservation's entry was dropped at its expiry
// brings a Commit to an id the store no longer holds: it consumes the id
// again, and when the store is full it fails without taking effect and can be
// retried.
func TestMemoryCommitAfterClockStepBack(t *testing.T) {
	ctx := context.Background()
	m, clk := newMemory(1)
	exp := clk.Now().Add(time.Hour)
	a := reserve(t, m, "a", exp, nil)
	clk.Advance(time.Hour)
	b := reserve(t, m, "b", clk.Now().Add(time.Hour), nil) // evicts a's expired claim
	clk.Advance(-time.Minute)                              // NTP steps the clock back
	if err := a.Commit(ctx); !errors.Is(err, replay.ErrFull) {
		t.Fatalf("Commit into a full store = %v, want ErrFull", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx); err != nil {
		t.Fatalf("Commit retried = %v, want nil", err)
	}
	reserve(t, m, "a", exp, replay.ErrReplayed)
}

func BenchmarkReserveCommit(b *testing.B) {
	// The clock ticks one microsecond per operation rather than following
	// the wall, so a stalled goroutine cannot see its token expire and the
	// store settles at a steady size: tokens live 100ms, about 100k entries,
	// and every Reserve evicts about as much as it adds.
	var ticks atomic.Int64
	base := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	m := replay.NewMemory(&replay.MemoryOptions{
		Now: func() time.Time { return base.Add(time.Duration(ticks.Load())) },
	})
	ctx := context.Background()
	var worker atomic.Uint64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		// Ids are 22 characters like real ones: "j", the goroutine, the
		// iteration.
		var id [22]byte
		id[0] = 'j'
		putHex(id[1:6], worker.Add(1))
		for n := uint64(0); pb.Next(); n++ {
			putHex(id[6:], n)
			now := base.Add(time.Duration(ticks.Add(int64(time.Microsecond))))
			r, err := m.Reserve(ctx, string(id[:]), now.Add(100*time.Millisecond))
			if err != nil {
				b.Fatal(err)
			}
			if err := r.Commit(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// putHex writes the low digits of v into dst in hexadecimal, zero-padded.
func putHex(dst []byte, v uint64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = "0123456789abcdef"[v&0xf]
		v >>= 4
	}
}

// BenchmarkGC measures what a full store costs every garbage collection of
// the process that holds it: one collection with the store holding n
// consumed ids, against one with the store empty.
func BenchmarkGC(b *testing.B) {
	for _, n := range []int{0, 100_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			ctx := context.Background()
			exp := time.Now().Add(time.Hour)
			m := replay.NewMemory(nil)
			var id [22]byte
			for i := range n {
				putHex(id[:], uint64(i))
				r, err := m.Reserve(ctx, string(id[:]), exp)
				if err != nil {
					b.Fatal(err)
				}
				if err := r.Commit(ctx); err != nil {
					b.Fatal(err)
				}
			}
			runtime.GC()
			for b.Loop() {
				runtime.GC()
			}
			if m.Len() != n {
				b.Fatalf("store holds %d ids, want %d", m.Len(), n)
			}
		})
	}
}
