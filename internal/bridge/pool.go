package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Warm sessions and restarts.
//
// A warm session is initialized for no caller yet (Options.Warm, and
// Options.First): it sits in b.idle under warmKey, which no principal's
// key can be (key gives "" or a length first). A call that finds no idle
// session of its caller takes one, or, while one is being opened and no
// other call waits for it, waits for it: it started earlier than one the
// call would start now. Taken, it is the caller's for good (sessions are
// never shared between callers), and another is started in the
// background, when there is room: warm sessions never evict anything.
//
// Starts are counted: CrashLoop failures in a row (a start that fails,
// an initialize the upstream does not answer, a warm session whose
// upstream ends unused) is a crash loop, and from then on starts back
// off (crashLoop).

// warmKey is the caller of warm sessions in b.idle.
const warmKey = "\x00warm"

// Defaults of Options' restart backoff.
const (
	DefaultRestartBackoff    = time.Second
	DefaultMaxRestartBackoff = 30 * time.Second
	// DefaultCrashLoop is the CrashLoop the proxy sets for a command.
	DefaultCrashLoop = 3
)

// DefaultPerCaller is the proxy's --max-procs-per-caller for a
// --max-procs of max: a quarter of it, at least 1.
func DefaultPerCaller(maxSessions int) int { return max(maxSessions/4, 1) }

// warmWaiter is a call waiting for a warm session being opened: ch gets
// it, taken for caller, or nil when its start failed.
type warmWaiter struct {
	caller string
	ch     chan *session
}

// takeWarmLocked takes the oldest warm session for caller, or, when none
// is ready, returns where one being opened will be handed to it (nil: its
// start failed); both nil when there is neither (the ready ones were
// dead). b.mu held.
func (b *Bridge) takeWarmLocked(caller string) (*session, <-chan *session) {
	for l := b.idle[warmKey]; len(l) > 0; l = b.idle[warmKey] {
		s := l[0]
		if len(l) == 1 {
			delete(b.idle, warmKey)
		} else {
			b.idle[warmKey] = l[1:]
		}
		s.mu.Lock()
		dead := s.dead
		if s.timer != nil {
			s.timer.Stop()
		}
		s.mu.Unlock()
		if dead {
			continue
		}
		s.caller = caller // refilled once the caller's victim, if any, is stopped (stopVictim)
		b.warmTaken()
		return s, nil
	}
	if b.warmStarting <= len(b.warmWaiters) {
		return nil, nil
	}
	ch := make(chan *session, 1)
	b.warmWaiters = append(b.warmWaiters, warmWaiter{caller: caller, ch: ch})
	b.startingBy[caller]++
	return nil, ch
}

// stopVictim stops a session evicted to make room (nil: none), then
// refills the warm sessions, one of which a call took, into the room it
// may have left: after the stop, so that the children stay within
// MaxSessions.
func (b *Bridge) stopVictim(victim func(context.Context) error) {
	if victim != nil {
		_ = victim(context.Background())
	}
	b.mu.Lock()
	b.refillLocked()
	b.mu.Unlock()
}

// refillLocked starts warm sessions, in the background, until Warm are
// ready or being opened, within MaxSessions, unless starts back off (then
// it tries again once the wait is over). b.mu held.
func (b *Bridge) refillLocked() {
	if b.closed {
		return
	}
	if wait := b.crash.wait(b.o.Now()); wait > 0 {
		b.retryLocked(wait)
		return
	}
	for len(b.idle[warmKey])+b.warmStarting < b.o.Warm && b.usedLocked() < b.o.MaxSessions {
		b.warmStarting++
		go b.startWarm(nil)
	}
}

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

// startWarm opens a warm session (on up when given: Options.First) and
// hands it to the first call waiting for one, or keeps it ready.
func (b *Bridge) startWarm(up Upstream) {
	s, err := b.open(context.Background(), warmKey, up)
	b.mu.Lock()
	b.warmStarting--
	var w *warmWaiter
	if len(b.warmWaiters) > 0 {
		w = &b.warmWaiters[0]
		b.warmWaiters = b.warmWaiters[1:]
		if b.startingBy[w.caller]--; b.startingBy[w.caller] <= 0 {
			delete(b.startingBy, w.caller)
		}
	}
	unused := false
	if err == nil {
		s.mu.Lock()
		unused = s.dead
		s.mu.Unlock()
	}
	if unused {
		// Its upstream ended before it was kept: unused, as warmEnded
		// counts it (drop did not know it yet, so nothing else does).
		b.log.Warn("bridge: a warm upstream session ended before any call")
		err = &startError{err: errLost, why: "it ended while warm, before any call"}
	}
	switch {
	case err == nil && w == nil && b.crash.unused && !b.crash.looping():
		// Kept warm after one that ended unused: it proves nothing
		// yet, and the count goes on until a call takes one (warmTaken)
		// or the crash loop's retry starts one.
		b.dialErr = nil
	case err == nil && w != nil:
		b.warmTaken()
	default:
		b.started(err)
		b.crash.unused = b.crash.unused || unused
	}
	switch {
	case err != nil:
	case b.closed:
		b.mu.Unlock()
		_ = s.stop(context.Background())
		if w != nil {
			w.ch <- nil
		}
		return
	default:
		b.sessions[s] = struct{}{}
		if b.info == nil {
			b.info = s.info
		}
		if w != nil {
			s.caller = w.caller
			w.ch <- s
			w = nil
			break
		}
		s.mu.Lock()
		s.idleAt = b.o.Now()
		if b.o.Warm == 0 { // First, or a crash loop's retry: kept a while only
			s.timer = time.AfterFunc(b.o.IdleTimeout, func() { b.expireIdle(s) })
		}
		s.mu.Unlock()
		b.idle[warmKey] = append(b.idle[warmKey], s)
	}
	b.refillLocked()
	b.mu.Unlock()
	if w != nil {
		w.ch <- nil // it tries again
	}
}

// warmEnded counts a warm session whose upstream ended unused (it was
// stopped and reaped) as a failed start, and refills. Until a call takes
// a warm session, the warm starts that follow do not end the count: an
// upstream that ends on its own right after initialize would otherwise
// be restarted back to back, each start wiping out the last failure.
func (b *Bridge) warmEnded(s *session) {
	why := exitSummary(errors.New("it ended while warm, before any call"), s.up)
	b.log.Warn("bridge: a warm upstream session ended before any call", exitAttrs(s.up)...)
	b.mu.Lock()
	b.started(&startError{err: errLost, why: why})
	b.crash.unused = true
	b.refillLocked()
	b.mu.Unlock()
}

// warmTaken counts a warm session a call takes as a start that
// succeeded, when warm sessions ended unused before it (warmEnded): it
// lived until a call. b.mu held.
func (b *Bridge) warmTaken() {
	if b.crash.unused {
		b.started(nil)
	}
}

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
