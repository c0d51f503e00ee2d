package bridge

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"
)

// TestRootsGateLearns: the first connection of an upstream that never
// asks for roots waits RootsWait, and later ones do not wait at all; one
// that asks is waited for, and then given RootsSettle to apply the answer.
// Without operator roots nothing waits.
func TestRootsGateLearns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRootsGate(true, time.Second, 50*time.Millisecond, slog.New(slog.DiscardHandler))
		never := make(chan struct{})
		start := time.Now()
		g.await(context.Background(), never)
		if d := time.Since(start); d != time.Second {
			t.Fatalf("first wait %v, want RootsWait (1s)", d)
		}
		start = time.Now()
		g.await(context.Background(), never)
		if d := time.Since(start); d != 0 {
			t.Fatalf("an upstream seen not to ask was waited for %v", d)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		g := newRootsGate(true, time.Second, 50*time.Millisecond, slog.New(slog.DiscardHandler))
		answered := make(chan struct{})
		go func() { time.Sleep(200 * time.Millisecond); close(answered) }()
		start := time.Now()
		g.await(context.Background(), answered)
		if d := time.Since(start); d != 250*time.Millisecond {
			t.Fatalf("waited %v, want the answer (200ms) and the settle (50ms)", d)
		}
		// Known to ask: a slow one is waited for beyond RootsWait.
		late := make(chan struct{})
		go func() { time.Sleep(3 * time.Second); close(late) }()
		start = time.Now()
		g.await(context.Background(), late)
		if d := time.Since(start); d != 3*time.Second+50*time.Millisecond {
			t.Fatalf("waited %v for an upstream known to ask", d)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		g := newRootsGate(false, time.Second, 50*time.Millisecond, nil)
		start := time.Now()
		g.await(context.Background(), make(chan struct{}))
		if d := time.Since(start); d != 0 {
			t.Fatalf("without operator roots the gate waited %v", d)
		}
	})
}
