package bridge

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/internal/rpc"
)

// Roots belong to the operator (see the package doc): the bridge answers
// the upstream's roots/list itself. This file holds that answer and the
// wait that makes a fresh session's first call see it.

// rootsResult is the roots/list result listing uris.
func rootsResult(uris []string) json.RawMessage {
	roots := make([]map[string]string, 0, len(uris))
	for _, u := range uris {
		roots = append(roots, map[string]string{"uri": u})
	}
	b, _ := json.Marshal(map[string]any{"roots": roots})
	return b
}

// rootsSignal is closed once an upstream connection had its first answer
// to roots/list.
type rootsSignal struct {
	c    chan struct{}
	once *sync.Once
}

func newRootsSignal() rootsSignal { return rootsSignal{c: make(chan struct{}), once: new(sync.Once)} }

func (r rootsSignal) fire() {
	if r.once != nil {
		r.once.Do(func() { close(r.c) })
	}
}

// answerRoots answers the upstream's roots/list with the operator's roots.
func (s *session) answerRoots(m *rpc.Message) {
	_ = s.conn.Respond(m.ID, s.b.roots)
	s.rootsAnswered.fire()
}

// What a rootsGate learnt of the upstream: all its connections run the
// same server, which asks for roots after initialize or never does.
const (
	rootsUnknown int32 = iota
	rootsAsked
	rootsNotAsked
)

// rootsGate holds a fresh upstream connection's first request until the
// upstream had the operator's roots: a 2025-11-25 server asks for them
// when initialized and applies the answer asynchronously, so a call sent
// at once would still see the directories of its command line. It waits
// only when the operator gave roots (an empty answer changes nothing on
// the servers that take roots as their boundary), learns from the first
// connection whether the upstream asks at all, and does not wait for an
// upstream that does not.
type rootsGate struct {
	on           bool
	wait, settle time.Duration
	log          *slog.Logger
	learnt       atomic.Int32
}

func newRootsGate(on bool, wait, settle time.Duration, log *slog.Logger) *rootsGate {
	return &rootsGate{on: on, wait: wait, settle: settle, log: log}
}

// await returns once answered is closed and the upstream had time to
// apply the answer, or the wait is over, or ctx is done.
func (g *rootsGate) await(ctx context.Context, answered <-chan struct{}) {
	if g == nil || !g.on {
		return
	}
	wait := g.wait
	switch g.learnt.Load() {
	case rootsNotAsked:
		return
	case rootsAsked:
		wait = max(wait, DefaultRootsAskedWait)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-answered:
		g.learnt.Store(rootsAsked)
		s := time.NewTimer(g.settle)
		defer s.Stop()
		select {
		case <-s.C:
		case <-ctx.Done():
		}
	case <-t.C:
		if g.learnt.CompareAndSwap(rootsUnknown, rootsNotAsked) {
			g.log.Info("bridge: the upstream did not ask for roots after initialize; the --roots reach it only if it asks later", "waited", wait)
		} else {
			g.log.Warn("bridge: an upstream connection did not ask for roots in time; its first request went on without them", "waited", wait)
		}
	case <-ctx.Done():
	}
}

// withRootsCapability returns body, a 2025-11-25 client's initialize,
// with the roots capability declared, so that the child asks for the
// operator's roots (which the proxy answers) even if the client offers
// none.
func withRootsCapability(body []byte) []byte { return editRootsCapability(body, true) }

// withoutRootsCapability returns body, a 2025-11-25 client's message
// passed through to an HTTP upstream, with the roots capability taken out
// of it if it is an initialize request: the upstream then never asks that
// client for roots (the proxy does not read what passes through, so it
// cannot answer for it), and keeps the directories its operator gave it.
func withoutRootsCapability(body []byte) []byte { return editRootsCapability(body, false) }

// editRootsCapability declares (declare) or removes the roots capability
// of body if it is an initialize request. Anything else, a body that
// already says what is asked, or one it cannot edit, is returned
// unchanged.
func editRootsCapability(body []byte, declare bool) []byte {
	m, err := rpc.Parse(body)
	if err != nil || m.Method != "initialize" || !m.IsRequest() || len(m.Params) == 0 || m.Params[0] != '{' {
		return body
	}
	params := mcpwire.SplitObject(mcpwire.TrimSpace(m.Params))
	caps := mcpwire.Object{}
	if c := params["capabilities"]; len(c) > 0 && c[0] == '{' {
		caps = mcpwire.SplitObject(mcpwire.TrimSpace(c))
	} else if !declare {
		return body
	}
	if _, ok := caps["roots"]; ok == declare {
		return body
	}
	if declare {
		caps["roots"] = json.RawMessage("{}")
	} else {
		delete(caps, "roots")
	}
	if params["capabilities"], err = caps.Encode(); err != nil {
		return body
	}
	p, err := params.Encode()
	if err != nil {
		return body
	}
	out, err := (&rpc.Message{ID: m.ID, Method: m.Method, Params: p}).Encode()
	if err != nil {
		return body
	}
	return out
}
