package replaytest_test

import (
	"sync"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/replay/replaytest"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestMemoryContract runs the contract suite on replay.Memory with a fake
// clock, as every Store implementation should in its own tests.
func TestMemoryContract(t *testing.T) {
	replaytest.Run(t, func(t *testing.T) replaytest.Fixture {
		clk := &fakeClock{t: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)}
		return replaytest.Fixture{
			Store:   replay.NewMemory(&replay.MemoryOptions{Lease: time.Minute, Now: clk.Now}),
			Now:     clk.Now,
			Advance: clk.Advance,
			Lease:   time.Minute,
		}
	})
}
