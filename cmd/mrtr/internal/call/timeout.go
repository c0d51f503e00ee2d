package call

import (
	"sync"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
)

// idleTimer calls expire once d has passed without a pause; pause and
// resume bracket the time spent at a prompt, which does not count, and
// each resume starts a fresh d. A zero d never expires. It is safe for
// concurrent use.
type idleTimer struct {
	mu      sync.Mutex
	d       time.Duration
	t       base.StopTimer
	paused  int
	stopped bool
}

// newIdleTimer starts the timer with after (nil: time.AfterFunc).
func newIdleTimer(d time.Duration, after base.AfterFunc, expire func()) *idleTimer {
	w := &idleTimer{d: d}
	switch {
	case d <= 0:
	case after == nil:
		w.t = time.AfterFunc(d, expire)
	default:
		w.t = after(d, expire)
	}
	return w
}

func (w *idleTimer) pause() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.paused++; w.paused == 1 && w.t != nil {
		w.t.Stop()
	}
}

func (w *idleTimer) resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.paused--; w.paused == 0 && w.t != nil && !w.stopped {
		w.t.Reset(w.d)
	}
}

func (w *idleTimer) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.t != nil {
		w.t.Stop()
	}
}
