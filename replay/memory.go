package replay

import (
	"context"
	"crypto/sha256"
	"math"
	"sync"
	"time"
)

// DefaultMaxEntries is the number of entries a [Memory] store holds when
// MemoryOptions.MaxEntries is zero. An entry takes about 120 bytes whatever
// the length of its id, so a full store of the default size takes about
// 128 MiB.
const DefaultMaxEntries = 1 << 20

// evictBatch bounds how many expired entries one Reserve or Commit removes,
// so no single call pays for a backlog. Each call adds at most one entry and
// removes up to evictBatch, so expired entries cannot pile up.
const evictBatch = 16

// MemoryOptions configures [NewMemory]. The zero value is ready to use.
type MemoryOptions struct {
	// MaxEntries bounds the reserved and consumed ids held at once. When the
	// store is full of unexpired entries, Reserve returns ErrFull. Zero means
	// DefaultMaxEntries; a negative value, or one above 1<<31-1, panics.
	MaxEntries int

	// Now reports the current time. Nil means time.Now.
	Now func() time.Time
}

// Memory is a [Store] that keeps ids in the memory of one process. It
// enforces single use only among the callers that share it: several server
// replicas need a shared store instead.
//
// Memory holds at most MaxEntries ids and forgets each one at the expiry
// Reserve was given, whether it is reserved or consumed by then; nothing
// frees a reservation earlier but its Release.
// Expired entries are removed a few at a time by later calls, in deadline
// order, so every call does O(log n) work. Deadlines follow the wall clock
// that Now reports.
//
// Nothing the store holds contains a pointer (ids are kept as fixed-size
// keys, deadlines as integers, the deadline heap as indexes), so however many
// ids it holds, the garbage collector has nothing in it to scan. Its memory
// grows with the largest number of ids held at once and is reused, not
// returned.
//
// A Memory must be created with [NewMemory]. It is safe for concurrent use by
// multiple goroutines. It never blocks on I/O, so Commit and Release ignore
// their context.
type Memory struct {
	mu      sync.Mutex
	index   map[memKey]int32 // id -> its slot in entries
	entries []entry          // the slots; a free one has gen 0
	free    []int32          // free slots in entries, reused last freed first
	queue   deadlineQueue    // the held slots, earliest deadline first
	gen     uint64           // the generation of the last entry stored

	maxEntries int
	now        func() time.Time
}

// memKey is an id in fixed size: ids of up to keyInline bytes are stored
// whole behind their length, longer ones as a SHA-256 prefix behind a marker
// no length takes, so that two ids share a key only if they are equal or
// their hashes collide on 184 bits.
type memKey [24]byte

const (
	keyInline = len(memKey{}) - 1
	keyHashed = 0xff
)

func keyOf(id string) memKey {
	var k memKey
	if len(id) <= keyInline {
		k[0] = byte(len(id))
		copy(k[1:], id)
		return k
	}
	sum := sha256.Sum256([]byte(id))
	k[0] = keyHashed
	copy(k[1:], sum[:])
	return k
}

type claimState uint8

const (
	reserved claimState = iota + 1
	consumed
)

// entry is one held id. gen identifies the claim that stored it: no two
// claims in the life of a store get the same gen, so a reservation that finds
// its gen in its slot still owns its id, and a stale Release cannot free
// another reservation's claim. The entry's deadline lives
// in its queue slot.
type entry struct {
	key   memKey
	gen   uint64
	pos   int32 // position in the queue
	state claimState
}

// NewMemory returns an empty Memory configured by opts. A nil opts is the
// same as a zero MemoryOptions. It panics if MaxEntries is negative or above
// 1<<31-1.
func NewMemory(opts *MemoryOptions) *Memory {
	var o MemoryOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.MaxEntries < 0:
		panic("replay: negative MemoryOptions.MaxEntries")
	case o.MaxEntries > math.MaxInt32:
		panic("replay: MemoryOptions.MaxEntries above 1<<31-1")
	case o.MaxEntries == 0:
		o.MaxEntries = DefaultMaxEntries
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Memory{
		index:      make(map[memKey]int32),
		maxEntries: o.MaxEntries,
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
	k := keyOf(id)
	exp := unixNano(expires)
	m.mu.Lock()
	defer m.mu.Unlock()
	now := unixNano(m.now())
	if exp <= now {
		return nil, ErrReplayed
	}
	m.evict(now, evictBatch)
	if s, ok := m.index[k]; ok {
		if m.live(s, now) {
			return nil, ErrReplayed
		}
		m.remove(s)
	}
	// evict removes expired entries earliest first, so if the store is still
	// full, every entry in it is unexpired.
	if len(m.index) >= m.maxEntries {
		return nil, ErrFull
	}
	r := &memReservation{m: m, key: k, expires: exp}
	r.slot, r.gen = m.insert(k, reserved, exp)
	return r, nil
}

// NonBlocking implements [NonBlocking]: no call to a Memory waits on I/O.
func (m *Memory) NonBlocking() {}

// Len reports how many unexpired ids the store holds, reserved or consumed.
// It removes the expired entries first.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.evict(unixNano(m.now()), len(m.queue))
	return len(m.index)
}

// memReservation is a claim made by [Memory.Reserve]. Every field after key
// is guarded by m.mu.
type memReservation struct {
	m       *Memory
	key     memKey
	expires int64 // the token's expiry
	slot    int32 // where the claim was stored
	gen     uint64
	done    bool // Commit or Release has taken effect
}

// owns reports whether r's claim is still in the store.
func (r *memReservation) owns() bool {
	return r.m.entries[r.slot].gen == r.gen
}

// Commit implements [Reservation].
func (r *memReservation) Commit(context.Context) error {
	m := r.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.done {
		return nil
	}
	now := unixNano(m.now())
	if r.expires <= now {
		// The token has expired and cannot be replayed: keep nothing.
		if r.owns() {
			m.remove(r.slot)
		}
		r.done = true
		return nil
	}
	if r.owns() {
		// The entry already lasts until the token's expiry.
		m.entries[r.slot].state = consumed
		r.done = true
		return nil
	}
	// Not reachable while the clock moves forward: a reservation holds its
	// id until the token expires, and Commit after that keeps nothing. A
	// clock stepped back (NTP, a VM restored) can bring a Commit here after
	// its entry was dropped; it then consumes the id once more, reporting
	// ErrReplayed if another reservation claimed it in the meantime.
	var err error
	cur, held := m.index[r.key]
	if held && m.live(cur, now) {
		err = ErrReplayed
		if m.entries[cur].state == consumed {
			r.done = true
			return err
		}
		// Another reservation holds the id while this handler has already
		// succeeded: consume the id now so that the other's Release cannot
		// make the token usable a third time.
	}
	if held {
		m.remove(cur)
	} else if len(m.index) >= m.maxEntries {
		if m.evict(now, evictBatch); len(m.index) >= m.maxEntries {
			return ErrFull
		}
	}
	m.insert(r.key, consumed, r.expires)
	r.done = true
	return err
}

// Release implements [Reservation].
func (r *memReservation) Release(context.Context) error {
	m := r.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.done {
		return nil
	}
	if r.owns() {
		m.remove(r.slot)
	}
	r.done = true
	return nil
}

// live reports whether the entry in slot s still counts at time now.
func (m *Memory) live(s int32, now int64) bool {
	return now < m.queue[m.entries[s].pos].deadline
}

// insert stores k until deadline and returns its slot and generation.
func (m *Memory) insert(k memKey, state claimState, deadline int64) (int32, uint64) {
	var s int32
	if n := len(m.free); n > 0 {
		s = m.free[n-1]
		m.free = m.free[:n-1]
	} else {
		s = int32(len(m.entries))
		m.entries = append(m.entries, entry{})
	}
	m.gen++
	m.entries[s] = entry{key: k, gen: m.gen, state: state}
	m.index[k] = s
	m.queue = append(m.queue, queued{deadline: deadline, slot: s})
	m.up(len(m.queue) - 1)
	return s, m.gen
}

// remove forgets the entry in slot s.
func (m *Memory) remove(s int32) {
	e := &m.entries[s]
	delete(m.index, e.key)
	i, last := int(e.pos), len(m.queue)-1
	*e = entry{}
	m.free = append(m.free, s)
	if i != last {
		m.set(i, m.queue[last])
	}
	m.queue = m.queue[:last]
	if i != last {
		m.fix(i)
	}
}

// evict removes up to limit expired entries, earliest deadline first.
func (m *Memory) evict(now int64, limit int) {
	for ; limit > 0 && len(m.queue) > 0 && now >= m.queue[0].deadline; limit-- {
		m.remove(m.queue[0].slot)
	}
}

// deadlineQueue is a binary min-heap of held slots by deadline. Each entry
// records its position so that it can be moved or removed in O(log n). The
// deadline sits in the queue rather than the entry so that sifting compares
// adjacent memory.
type deadlineQueue []queued

type queued struct {
	deadline int64 // Unix nanoseconds; the entry is absent from then on
	slot     int32
}

// set puts q at position i of the queue and records i in its entry.
func (m *Memory) set(i int, q queued) {
	m.queue[i] = q
	m.entries[q.slot].pos = int32(i)
}

// fix restores heap order after the deadline at i changed.
func (m *Memory) fix(i int) {
	if !m.down(i) {
		m.up(i)
	}
}

func (m *Memory) up(i int) {
	q := m.queue
	x := q[i]
	for i > 0 {
		parent := (i - 1) / 2
		if x.deadline >= q[parent].deadline {
			break
		}
		m.set(i, q[parent])
		i = parent
	}
	m.set(i, x)
}

// down sifts the entry at i toward the leaves and reports whether it moved.
func (m *Memory) down(i int) bool {
	q := m.queue
	x, start := q[i], i
	for {
		child := 2*i + 1
		if child >= len(q) {
			break
		}
		if r := child + 1; r < len(q) && q[r].deadline < q[child].deadline {
			child = r
		}
		if q[child].deadline >= x.deadline {
			break
		}
		m.set(i, q[child])
		i = child
	}
	m.set(i, x)
	return i != start
}

// unixNano is t in nanoseconds since the Unix epoch, saturated to the int64
// range (about the years 1678 to 2262) where t.UnixNano is undefined.
func unixNano(t time.Time) int64 {
	const maxSec = math.MaxInt64/int64(time.Second) - 1
	switch s := t.Unix(); {
	case s > maxSec:
		return math.MaxInt64
	case s < -maxSec:
		return math.MinInt64
	}
	return t.UnixNano()
}
