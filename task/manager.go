package task

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/reqstate"
)

// Defaults of Options.
const (
	DefaultServer       = "mrtr"
	DefaultTTL          = time.Hour
	DefaultMaxTTL       = 24 * time.Hour
	DefaultPollInterval = time.Second
	DefaultLease        = 30 * time.Second
	DefaultWatch        = time.Second
	DefaultAnswerPoll   = 250 * time.Millisecond
	DefaultMaxRunning   = 1000
)

// IDBytes is how many bytes of crypto/rand (Options.Rand) a task id
// carries: 192 bits, written as 32 characters of unpadded base64url.
const IDBytes = 24

// Options configures a Manager. The zero value is ready to use.
type Options struct {
	// Server names this server in every task's key; replicas that serve
	// the same tasks share it. Empty means DefaultServer (the guard's
	// default server id).
	Server string
	// TTL is a task's time to live when Spec.TTL is zero; MaxTTL caps
	// any. Zero means DefaultTTL and DefaultMaxTTL.
	TTL, MaxTTL time.Duration
	// PollInterval is the pollIntervalMs suggested when Spec leaves it
	// zero. Zero means DefaultPollInterval.
	PollInterval time.Duration
	// Lease is how long the node running a task may go without renewing
	// its claim before the task turns failed; Watch is how often it
	// renews it and looks for a cancellation made on another node. Zero
	// means DefaultLease and DefaultWatch.
	Lease, Watch time.Duration
	// AnswerPoll is how often a task waiting for answers looks for those
	// delivered to another node (answers delivered to this node wake it at
	// once). Zero means DefaultAnswerPoll.
	AnswerPoll time.Duration
	// MaxRunning bounds the tasks this node runs at once: Start refuses
	// more with ErrBusy. Zero means DefaultMaxRunning.
	MaxRunning int
	// Now, Rand and Logger default to time.Now, crypto/rand and a logger
	// that discards.
	Now    func() time.Time
	Rand   io.Reader
	Logger *slog.Logger
	// Observer is told of every task created, input asked, answers
	// taken, end, cancellation and refusal (see Observer); nil means
	// none. Adapters describe the request with WithCall.
	Observer Observer
}

// Errors of a Manager.
var (
	// ErrUnknown is what every tasks/* request for a task that is not the
	// caller's gets: unknown id, another principal's or server's task, or
	// an expired one alike.
	ErrUnknown = errors.New("task: unknown task")
	// ErrBusy: this node runs Options.MaxRunning tasks already.
	ErrBusy = errors.New("task: too many tasks running on this node")
)

// UnknownMessage is the message of the -32602 error for ErrUnknown, the
// same for every unknown task.
const UnknownMessage = "task not found"

// RPCError is a JSON-RPC error a task's work ends with: the task turns
// failed with it.
type RPCError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// internalError is a failed task's error when its work panicked or
// returned an error that is not an RPCError: nothing of the cause.
var internalError = json.RawMessage(`{"code":-32603,"message":"internal error"}`)

// Manager runs tasks on one node over a Store and serves the extension's
// requests for them. It is SDK-agnostic: the adapters (package gosdk)
// decode requests, derive the principal and gate on the declared
// extension, then call it. A Manager is safe for concurrent use.
type Manager struct {
	store Store
	o     Options

	mu      sync.Mutex
	runs    map[Key]*Run
	running atomic.Int64
}

// NewManager returns a Manager over store. A nil store panics; opts may be
// nil.
func NewManager(store Store, opts *Options) *Manager {
	if store == nil {
		panic("task: NewManager needs a store")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if o.Server == "" {
		o.Server = DefaultServer
	}
	def(&o.TTL, DefaultTTL)
	def(&o.MaxTTL, DefaultMaxTTL)
	def(&o.PollInterval, DefaultPollInterval)
	def(&o.Lease, DefaultLease)
	def(&o.Watch, DefaultWatch)
	def(&o.AnswerPoll, DefaultAnswerPoll)
	if o.MaxRunning <= 0 {
		o.MaxRunning = DefaultMaxRunning
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{store: store, o: o, runs: map[Key]*Run{}}
}

// Store returns the manager's store.
func (m *Manager) Store() Store { return m.store }

// Spec is what a handler chooses for a task it creates. The zero value
// takes the Manager's defaults.
type Spec struct {
	TTL          time.Duration
	PollInterval time.Duration
	Message      string // the first statusMessage
}

// Work is a task's work, run on its own goroutine. It returns the final
// result (the task completes) or an error (the task fails: with the
// error when it is an *RPCError, else with -32603). ctx ends when the
// task is cancelled, its lease is lost, or its TTL passes.
type Work func(ctx context.Context, r *Run) (json.RawMessage, error)

// Start creates a task owned by p, durable in the store before it
// returns, starts work on it and returns its CreateTaskResult. Values of
// ctx reach work; its cancellation does not (the task outlives the call).
func (m *Manager) Start(ctx context.Context, p reqstate.Principal, spec Spec, work Work) (json.RawMessage, error) {
	if m.running.Add(1) > int64(m.o.MaxRunning) {
		m.running.Add(-1)
		return nil, ErrBusy
	}
	started := false
	defer func() {
		if !started {
			m.running.Add(-1)
		}
	}()
	id, err := m.random(IDBytes)
	if err != nil {
		return nil, err
	}
	owner, err := m.random(16)
	if err != nil {
		return nil, err
	}
	ttl := spec.TTL
	if ttl <= 0 {
		ttl = m.o.TTL
	}
	ttl = millis(min(ttl, m.o.MaxTTL))
	poll := spec.PollInterval
	if poll <= 0 {
		poll = m.o.PollInterval
	}
	now := m.o.Now()
	rec := &Record{Status: Working, Message: spec.Message, Created: now, Updated: now, TTL: ttl,
		PollInterval: millis(poll), Owner: owner, LeaseUntil: now.Add(m.o.Lease)}
	k := Key{Server: m.o.Server, Principal: p, ID: id}
	if err := m.store.Create(ctx, k, rec); err != nil {
		return nil, fmt.Errorf("create task: %w", err)
	}
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	runCtx, stop := context.WithDeadline(runCtx, now.Add(ttl))
	r := &Run{m: m, key: k, owner: owner, ctx: runCtx, cancel: cancel, wake: make(chan struct{}, 1)}
	if o := m.o.Observer; o != nil {
		r.call = callFrom(ctx, "tools/call", p)
		o.TaskCreated(ctx, Event{Call: r.call, TaskID: id})
	}
	m.mu.Lock()
	m.runs[k] = r
	m.mu.Unlock()
	started = true
	go r.run(work, stop)
	return CreateResult(id, rec), nil
}

func (m *Manager) random(n int) (string, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(m.o.Rand, b); err != nil {
		return "", fmt.Errorf("task id: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func (m *Manager) key(p reqstate.Principal, id string) Key {
	return Key{Server: m.o.Server, Principal: p, ID: id}
}

func (m *Manager) local(k Key) *Run {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runs[k]
}

// lookup is the one lookup every request starts with.
func (m *Manager) lookup(ctx context.Context, k Key) (*Record, error) {
	if k.ID == "" || len(k.ID) > 256 {
		return nil, ErrUnknown
	}
	r, err := m.store.Get(ctx, k, m.o.Now())
	if errors.Is(err, ErrNotFound) {
		return nil, ErrUnknown
	}
	return r, err
}

// rejected reports a refused tasks/* request for k to the Observer.
func (m *Manager) rejected(ctx context.Context, method string, k Key, reason Reason, answers []mrtr.Answer) {
	if o := m.o.Observer; o != nil {
		o.TaskRejected(ctx, RejectEvent{Event: Event{Call: callFrom(ctx, method, k.Principal), TaskID: k.ID}, Reason: reason, Answers: answers})
	}
}

// find is lookup for a tasks/* request: an unknown task is reported.
func (m *Manager) find(ctx context.Context, method string, k Key) (*Record, error) {
	r, err := m.lookup(ctx, k)
	if errors.Is(err, ErrUnknown) {
		m.rejected(ctx, method, k, ReasonUnknownTask, nil)
	}
	return r, err
}

// Get serves tasks/get for p: the DetailedTask of its task id, or
// ErrUnknown.
func (m *Manager) Get(ctx context.Context, p reqstate.Principal, id string) (json.RawMessage, error) {
	r, err := m.find(ctx, MethodGet, m.key(p, id))
	if err != nil {
		return nil, err
	}
	return DetailedResult(id, r), nil
}

// Update serves tasks/update for p. Answers are taken only for keys the
// task has outstanding and only when they have the shape of a response
// to the request under their key; every other answer is ignored, as the
// extension says. An unknown task is ErrUnknown.
func (m *Manager) Update(ctx context.Context, p reqstate.Principal, id string, responses map[string]json.RawMessage) error {
	k := m.key(p, id)
	r, err := m.find(ctx, MethodUpdate, k)
	if err != nil {
		return err
	}
	valid := map[string]json.RawMessage{}
	for key, a := range responses {
		if req, ok := r.Requests[key]; ok && fits(requestMethod(req), a) {
			valid[key] = a
		}
	}
	var taken []string
	if len(valid) > 0 {
		if taken, err = m.store.Answer(ctx, k, valid, m.o.Now()); err != nil {
			return err
		}
	}
	if m.o.Observer != nil {
		m.observeUpdate(ctx, k, responses, taken)
	}
	if len(taken) > 0 {
		if run := m.local(k); run != nil {
			run.poke()
		}
	}
	return nil
}

// Cancel serves tasks/cancel for p: a task that is not terminal turns
// cancelled at once (by compare-and-set) and the context of its work
// ends, here at once, on another node at its next watch. A terminal task
// is left as it is; the answer is the same. An unknown task is ErrUnknown.
func (m *Manager) Cancel(ctx context.Context, p reqstate.Principal, id string) error {
	k := m.key(p, id)
	r, err := m.find(ctx, MethodCancel, k)
	if err != nil {
		return err
	}
	if r.Status.Terminal() {
		return nil
	}
	msg := "cancelled by the client"
	changed, err := m.store.Finish(ctx, k, "", End{Now: m.o.Now(), Status: Cancelled, Message: &msg})
	if err != nil {
		return err
	}
	if o := m.o.Observer; o != nil && changed {
		o.TaskCancelled(ctx, Event{Call: callFrom(ctx, MethodCancel, p), TaskID: id})
	}
	if run := m.local(k); run != nil {
		run.cancel(errCancelled)
	}
	return nil
}

var (
	errCancelled = errors.New("task: cancelled")
	errLost      = errors.New("task: the lease was lost or the task ended")
)

// Run is one running task, as its work sees it. It is safe for concurrent
// use.
type Run struct {
	m      *Manager
	key    Key
	owner  string
	ctx    context.Context
	cancel context.CancelCauseFunc
	wake   chan struct{}
	call   Call         // the tools/call that created the task, for events
	rounds atomic.Int32 // Ask calls
}

// ID returns the task id.
func (r *Run) ID() string { return r.key.ID }

// Principal returns the principal that owns the task.
func (r *Run) Principal() reqstate.Principal { return r.key.Principal }

func (r *Run) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Run) run(work Work, stop context.CancelFunc) {
	m := r.m
	defer func() {
		stop()
		r.cancel(nil)
		m.mu.Lock()
		delete(m.runs, r.key)
		m.mu.Unlock()
		m.running.Add(-1)
	}()
	go r.watch()
	res, err := r.safe(work)
	end := End{Now: m.o.Now(), Status: Completed, Result: res}
	if err != nil {
		end.Status, end.Result = Failed, nil
		var rpc *RPCError
		if errors.As(err, &rpc) {
			end.Error, _ = json.Marshal(rpc)
			msg := rpc.Message
			end.Message = &msg
		} else {
			end.Error = internalError
			msg := "the task failed: internal error"
			end.Message = &msg
			if r.ctx.Err() == nil {
				m.o.Logger.Error("task: work failed", "task", r.key.ID, "err", err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), 10*time.Second)
	defer cancel()
	changed, err := m.store.Finish(ctx, r.key, r.owner, end)
	if err != nil && !errors.Is(err, ErrNotFound) {
		// ErrNotFound: the TTL passed and the store forgot the task.
		m.o.Logger.Error("task: could not record the end of a task", "task", r.key.ID, "err", err)
	}
	if o := m.o.Observer; o != nil && changed {
		e := EndEvent{Event: Event{Call: r.call, TaskID: r.key.ID}, Rounds: int(r.rounds.Load()), Duration: time.Since(r.call.Start)}
		e.Outcome, e.ErrorCode = outcomeOf(res, end)
		o.TaskEnded(ctx, e)
	}
}

func (r *Run) safe(work Work) (res json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			r.m.o.Logger.Error("task: work panicked", "task", r.key.ID, "panic", fmt.Sprint(p))
			res, err = nil, errors.New("panic")
		}
	}()
	return work(r.ctx, r)
}

// watch renews the lease every Options.Watch and ends the work's context
// when the task was cancelled, failed or lost.
func (r *Run) watch() {
	m := r.m
	t := time.NewTicker(m.o.Watch)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		now := m.o.Now()
		st, err := m.store.Touch(r.ctx, r.key, r.owner, Touch{Now: now, LeaseUntil: now.Add(m.o.Lease)})
		switch {
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrNotOwner):
			r.cancel(errLost)
			return
		case err != nil:
			m.o.Logger.Warn("task: could not renew a lease", "task", r.key.ID, "err", err)
		case st == Cancelled:
			r.cancel(errCancelled)
			return
		case st.Terminal():
			r.cancel(errLost)
			return
		}
	}
}

// SetMessage sets the task's statusMessage.
func (r *Run) SetMessage(ctx context.Context, msg string) error {
	now := r.m.o.Now()
	st, err := r.m.store.Touch(ctx, r.key, r.owner, Touch{Now: now, LeaseUntil: now.Add(r.m.o.Lease), Message: &msg})
	if err == nil && st.Terminal() {
		err = ErrNotOwner
	}
	return err
}

// Ask puts reqs (each the JSON of {"method", "params"}) in the task's
// inputRequests, turns it input_required, and waits until every one is
// answered (through tasks/update on any node) or ctx ends. Keys must be
// new to this task (ErrKeyReused).
func (r *Run) Ask(ctx context.Context, reqs map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	m := r.m
	if len(reqs) == 0 {
		return map[string]json.RawMessage{}, nil
	}
	if err := m.store.Ask(ctx, r.key, r.owner, reqs, m.o.Now()); err != nil {
		return nil, err
	}
	keys := sortedKeys(reqs)
	round := r.rounds.Add(1)
	if o := m.o.Observer; o != nil {
		e := InputEvent{Event: Event{Call: r.call, TaskID: r.key.ID}, Round: int(round), Inputs: make([]mrtr.Input, len(keys))}
		for i, k := range keys {
			e.Inputs[i] = mrtr.Input{Key: k, Method: requestMethod(reqs[k])}
		}
		o.TaskInput(ctx, e)
	}
	got := make(map[string]json.RawMessage, len(keys))
	t := time.NewTicker(m.o.AnswerPoll)
	defer t.Stop()
	for {
		var rest []string
		for _, k := range keys {
			if _, ok := got[k]; !ok {
				rest = append(rest, k)
			}
		}
		if len(rest) == 0 {
			return got, nil
		}
		a, err := m.store.Collect(ctx, r.key, r.owner, rest)
		if err != nil {
			return nil, err
		}
		for k, v := range a {
			got[k] = v
		}
		if len(got) == len(keys) {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-r.ctx.Done():
			return nil, context.Cause(r.ctx)
		case <-r.wake:
		case <-t.C:
		}
	}
}

// observeUpdate reports the answers of a tasks/update: those taken, and
// those ignored (any other key of responses).
func (m *Manager) observeUpdate(ctx context.Context, k Key, responses map[string]json.RawMessage, taken []string) {
	o := m.o.Observer
	if len(taken) > 0 {
		slices.Sort(taken)
		o.TaskUpdated(ctx, UpdateEvent{Event: Event{Call: callFrom(ctx, MethodUpdate, k.Principal), TaskID: k.ID},
			Answers: answersOf(responses, taken, 0)})
	}
	if len(taken) == len(responses) {
		return
	}
	var ignored []string
	for _, key := range sortedKeys(responses) {
		if !slices.Contains(taken, key) {
			ignored = append(ignored, key)
		}
	}
	m.rejected(ctx, MethodUpdate, k, ReasonAnswersIgnored, answersOf(responses, ignored, MaxIgnoredAnswers))
}
