package task

import (
	"context"
	"encoding/json"
	"maps"
	"sync"
	"time"
)

// DefaultMaxTasks bounds a Memory store whose MemoryOptions leave it zero.
const DefaultMaxTasks = 10000

// MemoryOptions configures NewMemory. The zero value is ready to use.
type MemoryOptions struct {
	// MaxTasks is the most tasks kept at once, expired ones aside: Create
	// refuses more with ErrFull. Zero means DefaultMaxTasks.
	MaxTasks int
}

// Memory is a Store in this process's memory, for a single node: bounded
// (MemoryOptions.MaxTasks), and each task forgotten once its TTL has
// passed. It is safe for concurrent use.
type Memory struct {
	max int

	mu    sync.Mutex
	tasks map[Key]*memTask
}

type memTask struct {
	r       Record
	asked   map[string]bool            // every key ever asked
	answers map[string]json.RawMessage // taken, not yet collected
	expires time.Time
}

// NewMemory returns an empty Memory store. opts may be nil.
func NewMemory(opts *MemoryOptions) *Memory {
	m := &Memory{max: DefaultMaxTasks, tasks: map[Key]*memTask{}}
	if opts != nil && opts.MaxTasks > 0 {
		m.max = opts.MaxTasks
	}
	return m
}

// Len returns the tasks held, expired ones included until swept.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.tasks)
}

// live returns the unexpired task under k. m.mu is held.
func (m *Memory) live(k Key, now time.Time) *memTask {
	t := m.tasks[k]
	if t == nil {
		return nil
	}
	if !now.Before(t.expires) {
		delete(m.tasks, k)
		return nil
	}
	return t
}

// sweep drops every expired task. m.mu is held.
func (m *Memory) sweep(now time.Time) {
	for k, t := range m.tasks {
		if !now.Before(t.expires) {
			delete(m.tasks, k)
		}
	}
}

// Create implements Store.
func (m *Memory) Create(_ context.Context, k Key, r *Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.live(k, r.Created) != nil {
		return ErrExists
	}
	if len(m.tasks) >= m.max {
		m.sweep(r.Created)
		if len(m.tasks) >= m.max {
			return ErrFull
		}
	}
	t := &memTask{r: *r, asked: map[string]bool{}, answers: map[string]json.RawMessage{}, expires: r.Created.Add(r.TTL)}
	t.r.Requests = maps.Clone(r.Requests)
	for key := range t.r.Requests {
		t.asked[key] = true
	}
	m.tasks[k] = t
	return nil
}

// Get implements Store.
func (m *Memory) Get(_ context.Context, k Key, now time.Time) (*Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.live(k, now)
	if t == nil {
		return nil, ErrNotFound
	}
	if !t.r.Status.Terminal() && t.r.LeaseUntil.Before(now) {
		msg := LapsedMessage
		t.end(End{Now: now, Status: Failed, Error: LapsedError, Message: &msg})
	}
	r := t.r
	r.Requests = maps.Clone(t.r.Requests)
	return &r, nil
}

// Touch implements Store.
func (m *Memory) Touch(_ context.Context, k Key, owner string, u Touch) (Status, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.live(k, u.Now)
	if t == nil {
		return "", ErrNotFound
	}
	if t.r.Status.Terminal() {
		return t.r.Status, nil
	}
	if t.r.Owner != owner {
		return t.r.Status, ErrNotOwner
	}
	t.r.LeaseUntil = u.LeaseUntil
	if u.Message != nil {
		t.r.Message = *u.Message
		t.r.Updated = u.Now
	}
	return t.r.Status, nil
}

// Ask implements Store.
func (m *Memory) Ask(_ context.Context, k Key, owner string, reqs map[string]json.RawMessage, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.live(k, now)
	if t == nil {
		return ErrNotFound
	}
	if t.r.Status.Terminal() || t.r.Owner != owner {
		return ErrNotOwner
	}
	for key := range reqs {
		if t.asked[key] {
			return ErrKeyReused
		}
	}
	if t.r.Requests == nil {
		t.r.Requests = map[string]json.RawMessage{}
	}
	for key, req := range reqs {
		t.asked[key] = true
		t.r.Requests[key] = req
	}
	if len(t.r.Requests) > 0 {
		t.r.Status = InputRequired
	}
	t.r.Updated = now
	return nil
}

// Answer implements Store.
func (m *Memory) Answer(_ context.Context, k Key, answers map[string]json.RawMessage, now time.Time) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.live(k, now)
	if t == nil {
		return nil, ErrNotFound
	}
	if t.r.Status.Terminal() {
		return nil, nil
	}
	var taken []string
	for key, a := range answers {
		if _, ok := t.r.Requests[key]; !ok {
			continue
		}
		delete(t.r.Requests, key)
		t.answers[key] = a
		taken = append(taken, key)
	}
	if len(taken) > 0 {
		t.r.Updated = now
		if len(t.r.Requests) == 0 && t.r.Status == InputRequired {
			t.r.Status = Working
		}
	}
	return taken, nil
}

// Collect implements Store.
func (m *Memory) Collect(_ context.Context, k Key, owner string, keys []string) (map[string]json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.tasks[k] // an expired task's answers are of no use, but harmless
	if t == nil {
		return nil, ErrNotFound
	}
	if t.r.Owner != owner {
		return nil, ErrNotOwner
	}
	out := map[string]json.RawMessage{}
	for _, key := range keys {
		if a, ok := t.answers[key]; ok {
			out[key] = a
			delete(t.answers, key)
		}
	}
	return out, nil
}

// Finish implements Store.
func (m *Memory) Finish(_ context.Context, k Key, owner string, e End) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.live(k, e.Now)
	if t == nil {
		return false, ErrNotFound
	}
	if t.r.Status.Terminal() || (owner != "" && t.r.Owner != owner) {
		return false, nil
	}
	t.end(e)
	return true, nil
}

// end sets the terminal state e.
func (t *memTask) end(e End) {
	t.r.Status = e.Status
	if e.Message != nil {
		t.r.Message = *e.Message
	}
	t.r.Result, t.r.Error = e.Result, e.Error
	t.r.Requests = nil
	clear(t.answers)
	t.r.Updated = e.Now
}
