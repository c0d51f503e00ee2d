package bridge

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mrtr-go/mrtr/internal/rpc"
)

// hold is a bridged call waiting for the client's answers.
type hold struct {
	id      string
	caller  string
	method  string
	target  string
	s       *session
	a       *active
	round   int
	seq     int                     // input requests asked so far, for their keys
	pending map[string]*rpc.Message // input key -> the upstream's request
	timer   *time.Timer
	busy    sync.Mutex // one resume at a time
}

func newHoldID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// stateOf is the requestState naming a hold's round; the proxy seals it.
func (b *Bridge) stateOf(h *hold) string {
	if b.o.Node == "" {
		return "bridge:" + h.id + ":" + strconv.Itoa(h.round)
	}
	return "bridge:" + b.o.Node + "." + h.id + ":" + strconv.Itoa(h.round)
}

// parseState reads a state stateOf made: the node that holds the call
// ("" for a state without one), the hold's id and its round.
func parseState(st string) (node, id string, round int, ok bool) {
	rest, found := strings.CutPrefix(st, "bridge:")
	if !found {
		return "", "", 0, false
	}
	id, r, found := strings.Cut(rest, ":")
	if !found {
		return "", "", 0, false
	}
	if n, h, dotted := strings.Cut(id, "."); dotted {
		if n == "" || !validNode(n) {
			return "", "", 0, false
		}
		node, id = n, h
	}
	round, err := strconv.Atoi(r)
	return node, id, round, err == nil
}

// HolderOf returns the node (Options.Node) of the process holding the
// call that a bridge's requestState names. ok is false for a state that
// is not a bridge's, or one made by a bridge without a node.
func HolderOf(state string) (node string, ok bool) {
	node, _, _, ok = parseState(state)
	return node, ok && node != ""
}

// validNode reports whether n can be a node in a state: letters, digits,
// '-' and '_' (none of the separators '.' and ':').
func validNode(n string) bool {
	for _, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// expire drops a hold nobody resumed in time and cancels its call.
func (b *Bridge) expire(h *hold) {
	if !h.busy.TryLock() {
		return // being resumed right now
	}
	defer h.busy.Unlock()
	b.mu.Lock()
	current := b.holds[h.id] == h
	b.mu.Unlock()
	if !current {
		return
	}
	b.log.Info("bridge: a held call expired; the upstream's call is cancelled", "method", h.method)
	b.abandon(h, "the paused call expired")
}

// abandon forgets h, frees its session and cancels its call upstream, in
// that order: whoever reacts to the cancellation finds the bridge settled.
func (b *Bridge) abandon(h *hold, reason string) {
	b.endHold(h)
	b.release(h.s)
	h.a.call.Cancel(reason)
}

// endHold forgets h.
func (b *Bridge) endHold(h *hold) {
	if h.timer != nil {
		h.timer.Stop()
	}
	if h.id == "" {
		return
	}
	b.mu.Lock()
	if b.holds[h.id] == h {
		delete(b.holds, h.id)
	}
	b.mu.Unlock()
}
