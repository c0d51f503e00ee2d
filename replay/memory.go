package replay

import (
	"context"
	"sync"
	"time"
)

// DefaultMaxEntries is the number of entries a [Memory] store holds when
// MemoryOptions.MaxEntries is zero. An entry with a 22-byte id takes about
// 160 bytes, so a full store of the default size takes about 160 MiB.
const DefaultMaxEntries = 1 << 20

// DefaultLease is how long a reservation lasts when MemoryOptions.Lease is
// zero. It should exceed the time a handler normally takes: a handler that
// outlives its lease lets the token be claimed a second time.
const DefaultLease = 2 * time.Minute

// evictBatch bounds how many expired entries one Reserve or Commit removes,
// so no single call pays for a backlog. Each call adds at most one entry and
// removes up to evictBatch, so expired entries cannot pile up.
const evictBatch = 16

// MemoryOptions configures [NewMemory]. The zero value is ready to use.
type MemoryOptions struct {
	// MaxEntries bounds the reserved and consumed ids held at once. When the
	// store is full of unexpired entries, Reserve returns ErrFull. Zero means
	// DefaultMaxEntries; a negative value panics.
	MaxEntries int

	// Lease bounds how long a reservation holds its id without Commit or
	// Release. A reservation never outlives its token's expiry. Zero means
	// DefaultLease; a negative value panics.
	Lease time.Duration

	// Now reports the current time. Nil means time.Now.
	Now func() time.Time
}

// Memory is a [Store] that keeps ids in the memory of one process. It
// enforces single use only among the callers that share it: several server
// replicas need a shared store instead.
//
// Memory holds at most MaxEntries ids and forgets each one at its deadline
// (the lease for a reservation, the token's expiry for a consumed id).
// Expired entries are removed a few at a time by later calls, in deadline
// order, so every call does O(log n) work.
//
// A Memory must be created with [NewMemory]. It is safe for concurrent use by
// multiple goroutines. It never blocks on I/O, so Commit and Release ignore
// their context.
type Memory struct {
	mu         sync.Mutex
	entries    map[string]*claim
	queue      claimQueue // the claims in entries, earliest deadline first
	maxEntries int
	lease      time.Duration
	now        func() time.Time
}

type claimState uint8

const (
	reserved claimState = iota + 1
	consumed
)

// claim is both a map entry and the Reservation that created it: pointer
// identity tells a reservation whether it still owns its id, so a stale
// Release after its lease lapsed cannot free another reservation's claim.
// Its deadline lives in its queue slot. Every field is guarded by m.mu.
type claim struct {
	m       *Memory
	id      string
	expires time.Time // the token's expiry
	index   int       // position in m.queue, or -1 when not in the store
	state   claimState
	done    bool // Commit or Release has taken effect
}

// NewMemory returns an empty Memory configured by opts. A nil opts is the
// same as a zero MemoryOptions. It panics if MaxEntries or Lease is negative.
func NewMemory(opts *MemoryOptions) *Memory {
	var o MemoryOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.MaxEntries < 0:
		panic("replay: negative MemoryOptions.MaxEntries")
	case o.MaxEntries == 0:
		o.MaxEntries = DefaultMaxEntries
	}
	switch {
	case o.Lease < 0:
		panic("replay: negative MemoryOptions.Lease")
	case o.Lease == 0:
		o.Lease = DefaultLease
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Memory{
		entries:    make(map[string]*claim),
		maxEntries: o.MaxEntries,
		lease:      o.Lease,
		now:        o.Now,
	}
}

// Reserve implements [Store]. It returns ctx.Err() if ctx is already done,
// ErrReplayed if id is held or expires is not after the current time, and
// ErrFull if the store holds MaxEntries unexpired entries.
func (m *Memory) Reserve(ctx context.Context, id string, expires time.Time) (Reservation, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if !expires.After(now) {
		return nil, ErrReplayed
	}
	m.evict(now, evictBatch)
	if c, ok := m.entries[id]; ok {
		if m.live(c, now) {
			return nil, ErrReplayed
		}
		m.remove(c)
	}
	// evict removes expired entries earliest first, so if the store is still
	// full, every entry in it is unexpired.
	if len(m.entries) >= m.maxEntries {
		return nil, ErrFull
	}
	deadline := now.Add(m.lease)
	if expires.Before(deadline) {
		deadline = expires
	}
	c := &claim{m: m, id: id, state: reserved, expires: expires}
	m.insert(c, deadline)
	return c, nil
}

// Len reports how many unexpired ids the store holds, reserved or consumed.
// It removes the expired entries first.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.evict(m.now(), len(m.queue))
	return len(m.entries)
}

// Commit implements [Reservation].
func (c *claim) Commit(context.Context) error {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.done {
		return nil
	}
	now := m.now()
	cur := m.entries[c.id]
	if !c.expires.After(now) {
		// The token has expired and cannot be replayed: keep nothing.
		if cur == c {
			m.remove(c)
		}
		c.done = true
		return nil
	}
	if cur == c {
		// Still ours (perhaps past the lease, but nobody took it since).
		c.state = consumed
		m.queue[c.index].deadline = c.expires
		m.queue.fix(c.index)
		c.done = true
		return nil
	}
	// The lease lapsed and the id was dropped, released, or claimed anew.
	var err error
	if cur != nil && m.live(cur, now) {
		err = ErrReplayed
		if cur.state == consumed {
			c.done = true
			return err
		}
		// Another reservation holds the id while this handler has already
		// succeeded: consume the id now so that the other's Release cannot
		// make the token usable a third time.
	}
	if cur != nil {
		m.remove(cur)
	} else if len(m.entries) >= m.maxEntries {
		if m.evict(now, evictBatch); len(m.entries) >= m.maxEntries {
			return ErrFull
		}
	}
	c.state = consumed
	m.insert(c, c.expires)
	c.done = true
	return err
}

// Release implements [Reservation].
func (c *claim) Release(context.Context) error {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.done {
		return nil
	}
	if m.entries[c.id] == c {
		m.remove(c)
	}
	c.done = true
	return nil
}

// live reports whether c, which is in the store, still counts at time now.
func (m *Memory) live(c *claim, now time.Time) bool {
	return now.Before(m.queue[c.index].deadline)
}

func (m *Memory) insert(c *claim, deadline time.Time) {
	m.entries[c.id] = c
	m.queue.push(slot{deadline: deadline, c: c})
}

func (m *Memory) remove(c *claim) {
	m.queue.remove(c.index)
	delete(m.entries, c.id)
}

// evict removes up to limit expired entries, earliest deadline first.
func (m *Memory) evict(now time.Time, limit int) {
	for ; limit > 0 && len(m.queue) > 0 && !now.Before(m.queue[0].deadline); limit-- {
		m.remove(m.queue[0].c)
	}
}

// claimQueue is a binary min-heap of claims by deadline. Each claim records
// its index so that it can be moved or removed in O(log n). The deadline sits
// in the slot rather than the claim so that sifting compares adjacent memory
// instead of chasing pointers.
type claimQueue []slot

type slot struct {
	deadline time.Time // the claim is absent from deadline on
	c        *claim
}

func (q *claimQueue) push(s slot) {
	*q = append(*q, s)
	q.set(len(*q)-1, s)
	q.up(len(*q) - 1)
}

// remove takes out the slot at i.
func (q *claimQueue) remove(i int) {
	h := *q
	last := len(h) - 1
	h[i].c.index = -1
	if i != last {
		q.set(i, h[last])
	}
	h[last] = slot{}
	*q = h[:last]
	if i != last {
		q.fix(i)
	}
}

// fix restores heap order after the deadline at i changed.
func (q claimQueue) fix(i int) {
	if !q.down(i) {
		q.up(i)
	}
}

func (q claimQueue) set(i int, s slot) {
	q[i] = s
	s.c.index = i
}

func (q claimQueue) up(i int) {
	s := q[i]
	for i > 0 {
		parent := (i - 1) / 2
		if !s.deadline.Before(q[parent].deadline) {
			break
		}
		q.set(i, q[parent])
		i = parent
	}
	q.set(i, s)
}

// down sifts the slot at i toward the leaves and reports whether it moved.
func (q claimQueue) down(i int) bool {
	s, start := q[i], i
	for {
		child := 2*i + 1
		if child >= len(q) {
			break
		}
		if r := child + 1; r < len(q) && q[r].deadline.Before(q[child].deadline) {
			child = r
		}
		if !q[child].deadline.Before(s.deadline) {
			break
		}
		q.set(i, q[child])
		i = child
	}
	q.set(i, s)
	return i != start
}
