package bridge

import (
	"context"
	"errors"
	"slices"
	"time"
)

// DefaultPerCaller is the proxy's --max-procs-per-caller for a
// --max-procs of max: a quarter of it, at least 1.
func DefaultPerCaller(maxSessions int) int { return max(maxSessions/4, 1) }

// acquire returns an idle session of the caller, or a warm one (which
// becomes the caller's), or opens one.
func (b *Bridge) acquire(ctx context.Context, caller string) (*session, error) {
	auth := authorizationOf(ctx)
	waited := false // for a warm session that then failed to start
	b.mu.Lock()
	for {
		if b.closed {
			b.mu.Unlock()
			return nil, errClosed
		}
		if s := b.idleOf(caller, auth); s != nil {
			b.mu.Unlock()
			return s, nil
		}
		warm := auth == "" && !waited && (len(b.idle[warmKey]) > 0 || b.warmStarting > len(b.warmWaiters))
		if err := b.crash.blocked(b.o.Now()); err != nil && !warm {
			b.mu.Unlock()
			return nil, err
		}
		var victim func(context.Context) error
		if b.atCallerBound(caller) {
			// Its slot is this call's.
			if victim = b.evict(only(caller)); victim == nil {
				b.mu.Unlock()
				b.warn.refuse(limitPerCaller, "bridge: a call was refused: its caller is at its limit of upstream sessions (--max-procs-per-caller) and none of them is idle",
					"max", b.o.MaxSessionsPerCaller)
				return nil, errTooManyOfCaller
			}
		}
		if warm {
			s, wait := b.takeWarmLocked(caller)
			b.mu.Unlock()
			b.stopVictim(victim)
			if wait != nil {
				// nil when its start failed: the call starts its own (it
				// does not wait on warm starts that may keep failing).
				s, waited = <-wait, true
			}
			if s != nil {
				return s, nil
			}
			b.mu.Lock()
			continue
		}
		if victim == nil {
			var err error
			if victim, err = b.room(); err != nil {
				b.mu.Unlock()
				return nil, err
			}
		}
		b.starting++
		b.startingBy[caller]++
		b.mu.Unlock()
		if victim != nil {
			_ = victim(context.Background())
		}
		s, err := b.open(ctx, caller, nil)
		b.mu.Lock()
		b.starting--
		if b.startingBy[caller]--; b.startingBy[caller] <= 0 {
			delete(b.startingBy, caller)
		}
		b.started(err)
		if err == nil {
			if b.closed {
				b.mu.Unlock()
				_ = s.stop(context.Background())
				return nil, errClosed
			}
			b.sessions[s] = struct{}{}
			if b.info == nil {
				b.info = s.info
			}
		} else {
			b.refillLocked()
		}
		b.mu.Unlock()
		return s, err
	}
}

// idleOf takes an idle session of caller opened with the Authorization
// auth out of the idle ones; nil when there is none. b.mu held.
func (b *Bridge) idleOf(caller, auth string) *session {
	for {
		l := b.idle[caller]
		i := len(l) - 1
		for i >= 0 && l[i].auth != auth {
			i--
		}
		if i < 0 {
			return nil
		}
		s := l[i]
		b.idle[caller] = append(l[:i:i], l[i+1:]...)
		if len(b.idle[caller]) == 0 {
			delete(b.idle, caller)
		}
		s.mu.Lock()
		ok := !s.dead
		if s.timer != nil {
			s.timer.Stop()
		}
		s.mu.Unlock()
		if ok {
			return s
		}
	}
}

// ownedLocked counts the sessions of caller: open, being opened (or
// awaited warm), and the children of its 2025-11-25 client sessions.
// b.mu held.
func (b *Bridge) ownedLocked(caller string) int {
	n := b.startingBy[caller] + b.legacyBy[caller]
	for s := range b.sessions {
		if s.caller == caller {
			n++
		}
	}
	return n
}

// atCallerBound reports whether caller has MaxSessionsPerCaller
// sessions, when that is a bound of its own (below MaxSessions). b.mu
// held.
func (b *Bridge) atCallerBound(caller string) bool {
	return b.o.MaxSessionsPerCaller < b.o.MaxSessions && b.ownedLocked(caller) >= b.o.MaxSessionsPerCaller
}

// usedLocked counts the sessions held against MaxSessions. b.mu held.
func (b *Bridge) usedLocked() int {
	return len(b.sessions) + b.starting + b.warmStarting + b.legacyProcs
}

// slot makes room for one more session of caller (the child of a
// 2025-11-25 client session): at caller's bound it evicts an idle session
// of caller, else as room does; errTooManyOfCaller when caller has none
// idle (warned of). b.mu held.
func (b *Bridge) slot(caller string) (stop func(context.Context) error, err error) {
	if !b.atCallerBound(caller) {
		return b.room()
	}
	if stop = b.evict(only(caller)); stop == nil {
		b.warn.refuse(limitPerCaller, "bridge: a call was refused: its caller is at its limit of upstream sessions (--max-procs-per-caller) and none of them is idle",
			"max", b.o.MaxSessionsPerCaller)
		return nil, errTooManyOfCaller
	}
	return stop, nil
}

// room makes room for one more session (a bridge session or the child
// of a 2025-11-25 client session) within MaxSessions: at the bound it
// evicts a warm or idle session, and returns how to stop it, which the
// caller does once b.mu is released and before it opens its own in the
// slot, so that the children stay within the bound; errTooMany when there
// is none to evict (warned of). b.mu held.
func (b *Bridge) room() (stop func(context.Context) error, err error) {
	if b.usedLocked() < b.o.MaxSessions {
		return nil, nil
	}
	if stop = b.evict(nil); stop == nil {
		b.warn.refuse(limitProcs, "bridge: a call was refused: the proxy is at its limit of upstream sessions (--max-procs) and none is idle",
			"max", b.o.MaxSessions)
		return nil, errTooMany
	}
	b.log.Debug("bridge: an idle upstream session stopped to make room")
	return stop, nil
}

// evict takes the least recently used idle session, of either pool, whose
// caller (key of a principal) of accepts (nil accepts any) out of the
// count, and returns how to stop it; nil when there is none. The pools
// are one: the bridge's sessions with no call in flight, and the
// sessions of 2025-11-25 clients with no request in flight (those with
// their GET stream open last: a client listens on it). With of nil a
// warm session goes first (the oldest); with an of, warm sessions are
// nobody's (no of accepts warmKey). --max-procs-per-caller evicts with
// an of naming one caller. b.mu held.
//
// Evicting a 2025-11-25 client session ends it, as its idle timeout
// does: its id is unknown from then on, so its client's next request gets
// 404, which in 2025-11-25 tells a client to initialize a new session.
func (b *Bridge) evict(of func(caller string) bool) (stop func(context.Context) error) {
	var v *session
	var at time.Time
	if l := b.idle[warmKey]; of == nil && len(l) > 0 {
		return b.evicted(l[0])
	}
	for c, l := range b.idle {
		if c == warmKey || of != nil && !of(c) {
			continue
		}
		for _, s := range l {
			s.mu.Lock()
			t := s.idleAt
			s.mu.Unlock()
			if v == nil || t.Before(at) {
				v, at = s, t
			}
		}
	}
	if lv := b.legacy.evict(of, v != nil, at, func(c string) {
		b.legacyProcs--
		if b.legacyBy[c]--; b.legacyBy[c] <= 0 {
			delete(b.legacyBy, c)
		}
	}); lv != nil {
		return lv.end
	}
	if v == nil {
		return nil
	}
	return b.evicted(v)
}

// evicted takes v, an idle or warm session, out of the count, and returns
// how to stop it. b.mu held.
func (b *Bridge) evicted(v *session) (stop func(context.Context) error) {
	l := b.idle[v.caller]
	if i := slices.Index(l, v); i >= 0 {
		b.idle[v.caller] = slices.Delete(l, i, i+1)
	}
	if len(b.idle[v.caller]) == 0 {
		delete(b.idle, v.caller)
	}
	delete(b.sessions, v)
	v.mu.Lock()
	v.dead = true // never handed out again, whatever happens next
	if v.timer != nil {
		v.timer.Stop()
	}
	v.mu.Unlock()
	return v.stop
}

// drop forgets s, and reports whether it was warm (ready for no caller
// yet, and not stopped by the bridge).
func (b *Bridge) drop(s *session) (warm bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, known := b.sessions[s]
	delete(b.sessions, s)
	l := b.idle[s.caller]
	for i, x := range l {
		if x == s {
			b.idle[s.caller] = append(l[:i:i], l[i+1:]...)
			break
		}
	}
	if len(b.idle[s.caller]) == 0 {
		delete(b.idle, s.caller)
	}
	warm = known && s.caller == warmKey && !b.closed
	if known && !warm { // a warm one is refilled once its end is counted (warmEnded)
		b.refillLocked()
	}
	return warm
}

// release returns s to the caller's idle sessions.
func (b *Bridge) release(s *session) {
	s.mu.Lock()
	s.active = nil
	dead := s.dead
	s.idleAt = b.o.Now()
	if !dead {
		if s.timer != nil {
			s.timer.Stop()
		}
		s.timer = time.AfterFunc(b.o.IdleTimeout, func() { b.expireIdle(s) })
	}
	s.mu.Unlock()
	if dead {
		return
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		go s.stop(context.Background())
		return
	}
	b.idle[s.caller] = append(b.idle[s.caller], s)
	b.mu.Unlock()
}

func (b *Bridge) expireIdle(s *session) {
	b.mu.Lock()
	l := b.idle[s.caller]
	found := false
	for i, x := range l {
		if x == s {
			b.idle[s.caller] = append(l[:i:i], l[i+1:]...)
			found = true
			break
		}
	}
	if len(b.idle[s.caller]) == 0 {
		delete(b.idle, s.caller)
	}
	if found {
		delete(b.sessions, s)
		b.refillLocked()
	}
	b.mu.Unlock()
	if found {
		b.log.Debug("bridge: idle upstream session stopped")
		_ = s.stop(context.Background())
	}
}

// legacySlot takes one of the bridge's MaxSessions for the child of a
// 2025-11-25 client session of caller, evicting the least recently used
// idle session of either pool if need be (Bridge.slot).
func (b *Bridge) legacySlot(caller string) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return errClosed
	}
	victim, err := b.slot(caller)
	if err != nil {
		b.mu.Unlock()
		return err
	}
	b.legacyProcs++
	b.legacyBy[caller]++
	b.mu.Unlock()
	if victim != nil {
		_ = victim(context.Background())
	}
	return nil
}

// legacyFree gives back a slot of legacySlot.
func (b *Bridge) legacyFree(caller string) {
	b.mu.Lock()
	b.legacyProcs--
	if b.legacyBy[caller]--; b.legacyBy[caller] <= 0 {
		delete(b.legacyBy, caller)
	}
	b.refillLocked()
	b.mu.Unlock()
}

// Warm sessions.
//
// A warm session is initialized for no caller yet (Options.Warm, and
// Options.First): it sits in b.idle under warmKey, which no principal's
// key can be (key gives "" or a length first). A call that finds no idle
// session of its caller takes one, or, while one is being opened and no
// other call waits for it, waits for it: it started earlier than one the
// call would start now. Taken, it is the caller's for good (sessions are
// never shared between callers), and another is started in the
// background, when there is room: warm sessions never evict anything.

// warmKey is the caller of warm sessions in b.idle.
const warmKey = "\x00warm"

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
