package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Restarts.
//
// Starts are counted: CrashLoop failures in a row (a start that fails,
// an initialize the upstream does not answer, a warm session whose
// upstream ends unused) is a crash loop, and from then on starts back
// off (crashLoop).

// Defaults of Options' restart backoff.
const (
	DefaultRestartBackoff    = time.Second
	DefaultMaxRestartBackoff = 30 * time.Second
	// DefaultCrashLoop is the CrashLoop the proxy sets for a command.
	DefaultCrashLoop = 3
)

// retryLocked arranges a start after wait, for a crash loop: a warm
// session (kept even when Warm is zero, until IdleTimeout) that tells
// whether the upstream starts again, when no call does first. b.mu held.
func (b *Bridge) retryLocked(wait time.Duration) {
	if b.crash.retry != nil {
		return
	}
	b.crash.retry = time.AfterFunc(wait, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.crash.retry = nil
		if b.closed {
			return
		}
		if w := b.crash.wait(b.o.Now()); w > 0 {
			b.retryLocked(w)
			return
		}
		if b.crash.looping() && b.warmStarting == 0 && b.usedLocked() < b.o.MaxSessions {
			b.warmStarting++
			go b.startWarm(nil)
			return
		}
		b.refillLocked()
	})
}

func (b *Bridge) stopRetryLocked() { b.crash.stopRetry() }

// crashLoop counts the starts that failed in a row, and says how long
// the next must wait once they are a crash loop: after failures in a row,
// base, doubled with each further failure up to most. after zero never
// loops. Not safe for concurrent use: its owner's mutex guards it.
type crashLoop struct {
	after      int
	base, most time.Duration

	fails  int
	unused bool      // a warm session ended unused since the last start that succeeded (Bridge.warmEnded)
	why    string    // the last failure's, with how the upstream ended
	next   time.Time // no start before, while looping
	retry  *time.Timer
}

func newCrashLoop(after int, base, most time.Duration) crashLoop {
	if base <= 0 {
		base = DefaultRestartBackoff
	}
	if most < base {
		most = max(DefaultMaxRestartBackoff, base)
	}
	return crashLoop{after: after, base: base, most: most}
}

func (c *crashLoop) looping() bool { return c.after > 0 && c.fails >= c.after }

// wait is how long starts must still wait; 0 when they need not.
func (c *crashLoop) wait(now time.Time) time.Duration {
	if !c.looping() {
		return 0
	}
	return max(c.next.Sub(now), 0)
}

// blocked is the error of a call that would start the upstream while
// starts back off; nil when it may. It names no cause: the client is not
// told what the upstream wrote on its stderr.
func (c *crashLoop) blocked(now time.Time) error {
	if w := c.wait(now); w > 0 {
		return &backoffError{fails: c.fails, wait: w}
	}
	return nil
}

// backoffError is a start refused while starts back off.
type backoffError struct {
	fails int
	wait  time.Duration
}

func (e *backoffError) Error() string {
	return fmt.Sprintf("the upstream keeps failing to start (%d times in a row); the proxy tries again in %s", e.fails, e.wait.Round(time.Second))
}

// record counts a start's outcome (a *startError when it failed), logs
// the start of a crash loop's wait and its end, and returns the wait
// when starts now back off (0 otherwise).
func (c *crashLoop) record(err error, now time.Time, log *slog.Logger) time.Duration {
	if err == nil {
		if c.looping() {
			log.Info("bridge: the upstream started again: the crash loop is over", "failures", c.fails)
		}
		c.fails, c.why, c.unused = 0, "", false
		c.stopRetry()
		return 0
	}
	c.fails++
	c.why = err.Error()
	var se *startError
	if errors.As(err, &se) {
		c.why = se.why
	}
	if !c.looping() {
		return 0
	}
	d := c.base << min(c.fails-c.after, 30)
	if d <= 0 || d > c.most {
		d = c.most
	}
	c.next = now.Add(d)
	log.Warn("bridge: the upstream keeps failing to start: the next start waits", "failures", c.fails, "wait", d, "cause", c.why)
	c.stopRetry()
	return d
}

func (c *crashLoop) stopRetry() {
	if c.retry != nil {
		c.retry.Stop()
		c.retry = nil
	}
}

// report is the error of a crash loop for the readiness check: how many
// starts failed, when the next is due, and how the last one ended (its
// exit status and the end of its stderr, for a command); nil when there
// is no crash loop.
func (c *crashLoop) report(now time.Time) error {
	if !c.looping() {
		return nil
	}
	return fmt.Errorf("the upstream failed to start %d times in a row, the next start in %s; the last: %s",
		c.fails, c.wait(now).Round(time.Millisecond), c.why)
}

// started counts a start's outcome and, in a crash loop, arranges the
// retry. b.mu held.
func (b *Bridge) started(err error) {
	b.dialErr = err
	if err != nil && b.closed {
		return
	}
	if d := b.crash.record(err, b.o.Now(), b.log); d > 0 {
		b.retryLocked(d)
	}
}

// CrashLoop reports why the upstream is in a crash loop (Options.CrashLoop
// starts in a row failed): how many, how the last one ended (its exit
// status and the end of its stderr, for a command) and when the next
// start is due. Nil when it is not, and once a start succeeded again.
func (b *Bridge) CrashLoop(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.crash.report(b.o.Now())
}

// startError is why a session could not be opened: err for the caller,
// why for the log and the readiness check (with how the upstream ended).
type startError struct {
	err error
	why string
}

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// exitSummary is err with how a closed upstream ended, when it says (its
// exit status and the end of its stderr).
func exitSummary(err error, up Upstream) string {
	a := exitAttrs(up)
	var b strings.Builder
	b.WriteString(err.Error())
	for i := 0; i+1 < len(a); i += 2 {
		fmt.Fprintf(&b, "; %s: %v", a[i], a[i+1])
	}
	return b.String()
}
