package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/internal/rpc"
)

// session is one initialized legacy connection.
type session struct {
	b      *Bridge
	up     Upstream
	conn   *rpc.Conn
	caller string
	auth   string // the Authorization it was opened with; reused only with the same
	info   *initResult

	rootsAnswered rootsSignal // the upstream had the operator's roots

	mu     sync.Mutex
	active *active // the bridged call in flight, if any
	idleAt time.Time
	timer  *time.Timer // stops the session when idle too long
	dead   bool
}

type initResult struct {
	ProtocolVersion string          `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
	ServerInfo      json.RawMessage `json:"serverInfo"`
	Instructions    string          `json:"instructions,omitempty"`
}

// open dials (unless given up, dialled already) and initializes a
// session. Its error is a *startError.
func (b *Bridge) open(ctx context.Context, caller string, up Upstream) (*session, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.o.StartTimeout)
	defer cancel()
	if up == nil {
		var err error
		if up, err = b.o.Dial(ctx); err != nil {
			b.log.Error("bridge: start the upstream", "error", err)
			return nil, &startError{err: fmt.Errorf("the upstream could not be started: %w", err), why: err.Error()}
		}
	}
	s := &session{b: b, up: up, caller: caller, auth: authorizationOf(ctx), rootsAnswered: newRootsSignal()}
	if a, ok := up.(authorizer); ok {
		a.authorize(s.auth)
	}
	s.conn = rpc.NewConn(up, s.handle)
	params, _ := json.Marshal(map[string]any{
		"protocolVersion": LegacyVersion,
		"capabilities": map[string]any{
			"elicitation": map[string]any{"form": map[string]any{}, "url": map[string]any{}},
			"sampling":    map[string]any{},
			"roots":       map[string]any{"listChanged": false},
		},
		"clientInfo": map[string]string{"name": b.o.ClientName, "version": b.o.ClientVersion},
	})
	m, err := s.conn.Call(ctx, "initialize", params)
	if err == nil && m.Error != nil {
		err = fmt.Errorf("initialize refused: %s", m.Error)
	}
	var info initResult
	if err == nil {
		if err = json.Unmarshal(m.Result, &info); err == nil && info.ProtocolVersion == "" {
			err = errors.New("initialize result without protocolVersion")
		}
	}
	if err == nil {
		err = s.conn.Notify("notifications/initialized", nil)
	}
	if err != nil {
		_ = up.Close(context.Background())
		b.log.Error("bridge: initialize the upstream", append([]any{"error", err}, exitAttrs(up)...)...)
		return nil, &startError{err: fmt.Errorf("the upstream could not be initialized: %w", err), why: exitSummary(err, up)}
	}
	s.info = &info
	s.conn.AfterDone(func() { // a session whose upstream ends is dropped
		s.mu.Lock()
		s.dead = true
		a := s.active
		s.mu.Unlock()
		warm := b.drop(s)
		if a != nil {
			a.push(nil) // wakes the call: the upstream is gone
		}
		// Its output ended, not necessarily the child: one that closed
		// stdout and lives on is stopped (grace, SIGTERM, SIGKILL).
		go func() {
			_ = s.stop(context.Background())
			if warm {
				b.warmEnded(s)
			}
		}()
	})
	b.rootsGate.await(ctx, s.rootsAnswered.c)
	b.log.Info("bridge: upstream session started", "protocol_version", info.ProtocolVersion)
	return s, nil
}

func (s *session) stop(ctx context.Context) error {
	s.mu.Lock()
	s.dead = true
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	return s.up.Close(ctx)
}

// detach ends the call a on s, if it is still the one in flight there:
// from then on the upstream's messages are handled as outside a call.
// It runs on the connection's reading goroutine (rpc.Conn.StartThen), in
// order with handle.
func (s *session) detach(a *active) {
	s.mu.Lock()
	if s.active == a {
		s.active = nil
	}
	s.mu.Unlock()
}

// handle receives the upstream's requests and notifications.
func (s *session) handle(m *rpc.Message) {
	s.mu.Lock()
	a := s.active
	s.mu.Unlock()
	if a != nil {
		dropped, ok := a.push(m)
		if dropped > 0 {
			s.b.dropped.Add(int64(dropped))
			s.b.warn.warn("queue", "bridge: a held or slow call's queue is full: the upstream's notifications are dropped",
				"max", s.b.o.MaxQueue, "max_bytes", s.b.o.MaxQueueBytes)
		}
		if !ok {
			go s.b.flooded(s, a)
		}
		return
	}
	s.outside(m)
}

// flooded stops a session whose upstream overflowed its call's queue
// (see fifo): the session is never reused, the hold of its call, if one
// waits for a resume, ends (the resume is told to start over), and a call
// being relayed gets errFlood.
func (b *Bridge) flooded(s *session, a *active) {
	b.log.Warn("bridge: the upstream overflowed a call's queue with requests (a protocol error); its session is stopped",
		"max", b.o.MaxQueue, "max_bytes", b.o.MaxQueueBytes)
	s.mu.Lock()
	s.dead = true
	s.mu.Unlock()
	b.mu.Lock()
	var h *hold
	for _, x := range b.holds {
		if x.a == a {
			h = x
			break
		}
	}
	b.mu.Unlock()
	if h != nil && h.busy.TryLock() { // else a resume relays it, and reads errFlood
		b.mu.Lock()
		current := b.holds[h.id] == h
		b.mu.Unlock()
		if current {
			b.abandon(h, errFlood.Error())
		}
		h.busy.Unlock()
	}
	_ = s.stop(context.Background())
	b.drop(s)
}

// outside answers a request that arrived while no bridged call is in
// flight on the session.
func (s *session) outside(m *rpc.Message) {
	if !m.IsRequest() {
		return
	}
	switch m.Method {
	case mcpwire.MethodListRoots:
		s.answerRoots(m)
	case "ping":
		_ = s.conn.Respond(m.ID, json.RawMessage("{}"))
	default:
		_ = s.conn.RespondError(m.ID, -32601, "method not found: no call is waiting for "+m.Method)
	}
}

// active is the call in flight on a session: the upstream's response to
// it, and the messages the upstream sent meanwhile, queued in order
// within Options.MaxQueue and MaxQueueBytes.
type active struct {
	call *rpc.Call

	mu     sync.Mutex
	queue  fifo[*rpc.Message] // nil entry: the upstream is gone
	err    error              // errFlood once the queue overflowed
	signal chan struct{}
}

func (b *Bridge) newActive() *active {
	return &active{queue: newFifo[*rpc.Message](b.o.MaxQueue, b.o.MaxQueueBytes), signal: make(chan struct{}, 1)}
}

// push queues m; nil says the upstream is gone. It returns the
// notifications dropped for room, and false when m overflowed the queue:
// then the queue is emptied but for a nil, which tells the call to end
// with errFlood, and takes nothing more; the caller stops the session.
func (a *active) push(m *rpc.Message) (dropped int, ok bool) {
	a.mu.Lock()
	switch {
	case a.err != nil: // overflowed: the call reads only its end
		ok = true
	case m == nil:
		a.queue.force(nil, 0, false)
		ok = true
	default:
		dropped, ok = a.queue.push(m, msgSize(m), m.IsNotification())
		if !ok {
			a.err = errFlood
			a.queue.take()
			a.queue.force(nil, 0, false)
		}
	}
	a.mu.Unlock()
	select {
	case a.signal <- struct{}{}:
	default:
	}
	return dropped, ok
}

func (a *active) pop() (*rpc.Message, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.queue.pop()
}

// lost is why the call ended without its response: errLost when the
// upstream went, errFlood when it overflowed the queue.
func (a *active) lost() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return a.err
	}
	return errLost
}
