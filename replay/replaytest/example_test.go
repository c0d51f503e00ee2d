package replaytest_test

import (
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/fakeclock"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/replay/replaytest"
)

// TestMemoryContract runs the contract suite on replay.Memory with a fake
// clock, as every Store implementation should in its own tests.
func TestMemoryContract(t *testing.T) {
	replaytest.Run(t, func(t *testing.T) replaytest.Fixture {
		clk := fakeclock.New(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
		return replaytest.Fixture{
			Store:   replay.NewMemory(&replay.MemoryOptions{Lease: time.Minute, Now: clk.Now}),
			Now:     clk.Now,
			Advance: clk.Advance,
			Lease:   time.Minute,
		}
	})
}
