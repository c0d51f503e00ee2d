package bridge

import (
	"errors"
	"slices"
	"sync"

	"github.com/mrtr-go/mrtr/internal/rpc"
)

// Defaults of Options.MaxQueue and Options.MaxQueueBytes.
const (
	DefaultMaxQueue      = 1024
	DefaultMaxQueueBytes = 8 << 20
)

// errFlood is what a call, or a 2025-11-25 client's request, gets when
// its upstream overflowed a queue with messages that cannot be dropped.
var errFlood = errors.New("the upstream sent more requests than the proxy keeps while nobody reads them (a protocol error); its session was stopped")

// fifo is a bounded queue of an upstream's messages waiting for their
// reader (a held call waits for its client's resume; a client may read
// slowly): at most max messages of at most maxBytes bytes in all, though
// an empty queue takes any one message (the transport bounds one:
// rpc.DefaultMaxLine). When one more does not fit, the queued
// notifications make room, oldest first: nobody waits for an answer to
// them, and a call or a client loses nothing it needs. A notification
// that finds no room is dropped itself. A request or response that finds
// no room overflows the queue: the upstream sent more requests than any
// client answers, a protocol error for which the owner stops it.
//
// A fifo is not safe for concurrent use: its owner locks it.
type fifo[T any] struct {
	max, maxBytes int
	items         []fifoItem[T]
	bytes         int
}

type fifoItem[T any] struct {
	v    T
	size int
	note bool
}

func newFifo[T any](max, maxBytes int) fifo[T] {
	if max <= 0 {
		max = DefaultMaxQueue
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxQueueBytes
	}
	return fifo[T]{max: max, maxBytes: maxBytes}
}

func (q *fifo[T]) fits(size int) bool {
	return len(q.items) == 0 || len(q.items) < q.max && q.bytes+size <= q.maxBytes
}

// push queues v, of size bytes, a notification when note. It returns the
// notifications dropped for room (v among them when it is one that found
// none), and false when v overflowed the queue and was not queued.
func (q *fifo[T]) push(v T, size int, note bool) (dropped int, ok bool) {
	if !note {
		for !q.fits(size) && q.dropNote() {
			dropped++
		}
	}
	if !q.fits(size) {
		if note {
			return 1, true
		}
		return dropped, false
	}
	q.force(v, size, note)
	return dropped, true
}

// force queues v past the bounds: the one end-of-stream marker.
func (q *fifo[T]) force(v T, size int, note bool) {
	q.items = append(q.items, fifoItem[T]{v: v, size: size, note: note})
	q.bytes += size
}

// dropNote drops the oldest notification queued; false when there is none.
func (q *fifo[T]) dropNote() bool {
	for i, it := range q.items {
		if it.note {
			q.bytes -= it.size
			q.items = slices.Delete(q.items, i, i+1)
			return true
		}
	}
	return false
}

func (q *fifo[T]) pop() (T, bool) {
	var zero T
	if len(q.items) == 0 {
		return zero, false
	}
	it := q.items[0]
	q.items[0] = fifoItem[T]{} // the message is the reader's now, not the array's
	q.items = q.items[1:]
	q.bytes -= it.size
	if len(q.items) == 0 {
		q.items = nil
	}
	return it.v, true
}

// take empties the queue and returns what it held, oldest first.
func (q *fifo[T]) take() []T {
	if len(q.items) == 0 {
		return nil
	}
	out := make([]T, len(q.items))
	for i, it := range q.items {
		out[i] = it.v
	}
	q.items, q.bytes = nil, 0
	return out
}

// size reports the messages queued and their bytes.
func (q *fifo[T]) size() (n, bytes int) { return len(q.items), q.bytes }

// msgSize is about the memory a parsed message holds: its members as raw
// JSON.
func msgSize(m *rpc.Message) int {
	return len(m.ID) + len(m.Method) + len(m.Params) + len(m.Result) + len(m.Error) + 32
}

// queue hands messages from the reading goroutine to one HTTP response,
// within its bounds (fifo).
type queue struct {
	mu     sync.Mutex
	msgs   fifo[[]byte]
	signal chan struct{}
}

func newQueue(max, maxBytes int) *queue {
	return &queue{msgs: newFifo[[]byte](max, maxBytes), signal: make(chan struct{}, 1)}
}

// push queues b, a notification when note (see fifo.push).
func (q *queue) push(b []byte, note bool) (dropped int, ok bool) {
	q.mu.Lock()
	dropped, ok = q.msgs.push(b, len(b), note)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
	return dropped, ok
}

func (q *queue) empty() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	n, _ := q.msgs.size()
	return n == 0
}

func (q *queue) take() [][]byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.msgs.take()
}

// size reports the messages queued and their bytes.
func (q *queue) size() (n, bytes int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.msgs.size()
}
