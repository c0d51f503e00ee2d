package mrtr_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// resumeCounter counts resumes by outcome; it embeds NopObserver for the
// events it does not need.
type resumeCounter struct {
	mrtr.NopObserver
	mu sync.Mutex
	by map[mrtr.Outcome]int
}

func (c *resumeCounter) Resumed(_ context.Context, e mrtr.ResumeEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.by[e.Outcome]++
}

func (c *resumeCounter) Paused(_ context.Context, e mrtr.PauseEvent) {
	fmt.Printf("paused round %d under key %s\n", e.Round, e.KeyID)
}

// An Observer sees what the guard decides, for metrics and traces,
// without the library depending on a metrics or tracing package.
func ExampleObserver() {
	ring, _ := reqstate.GenerateKeyRing("k1", nil)
	counter := &resumeCounter{by: map[mrtr.Outcome]int{}}
	g := mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: replay.NewMemory(nil), Observer: counter})
	ctx := context.Background()
	r := &mrtr.Request{Method: "tools/call", ProtocolVersion: "2026-07-28", Target: "deploy", Arguments: []byte(`{"env":"prod"}`)}

	f, _ := g.Begin(ctx, r)
	tok, _ := f.Pause(nil, "confirm")
	f.End(ctx, nil)

	r.RequestState = tok
	for range 2 { // the second use is refused: single use
		if f, err := g.Begin(ctx, r); err == nil {
			f.End(ctx, nil)
		}
	}
	fmt.Println("ok:", counter.by[mrtr.OutcomeOK], "replayed:", counter.by[mrtr.Outcome(mrtr.ReasonReplayed)])
	// Output:
	// paused round 1 under key k1
	// ok: 1 replayed: 1
}
