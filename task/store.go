package task

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/mrtr-go/mrtr/reqstate"
)

// Status is the state of a task.
type Status string

// The statuses of the extension. Completed, Cancelled and Failed are
// terminal: a task leaves none of them.
const (
	Working       Status = "working"
	InputRequired Status = "input_required"
	Completed     Status = "completed"
	Cancelled     Status = "cancelled"
	Failed        Status = "failed"
)

// Terminal reports whether s is completed, cancelled or failed.
func (s Status) Terminal() bool { return s == Completed || s == Cancelled || s == Failed }

// Key names a task in a store: the server that made it, the principal that
// owns it and its id. Every read and write of a task goes through its whole
// key, so a task is never found by its id alone: another principal's (or
// another server's) lookup of the same id is the lookup of a task that does
// not exist.
type Key struct {
	Server    string
	Principal reqstate.Principal
	ID        string
}

// Record is what a store keeps of one task.
type Record struct {
	Status  Status
	Message string // statusMessage; empty for none
	Created time.Time
	Updated time.Time
	// TTL is how long the task lives from Created; the store forgets it
	// then, whatever its status.
	TTL          time.Duration
	PollInterval time.Duration
	// Requests are the outstanding input requests, by key, each the JSON
	// of {"method", "params"}: those asked and not yet answered.
	Requests map[string]json.RawMessage
	// Result is the final result of a completed task; Error the JSON-RPC
	// error object of a failed one.
	Result json.RawMessage
	Error  json.RawMessage
	// Owner names the node (a random token per running task) that runs the
	// task, and LeaseUntil how long its claim lasts without renewal.
	Owner      string
	LeaseUntil time.Time
}

// Touch is what a running task's owner writes when it renews its lease.
type Touch struct {
	Now        time.Time
	LeaseUntil time.Time
	// Message replaces the statusMessage when not nil.
	Message *string
}

// End is a terminal state to set by compare-and-set.
type End struct {
	Now     time.Time
	Status  Status // Completed, Cancelled or Failed
	Message *string
	Result  json.RawMessage // Completed
	Error   json.RawMessage // Failed
}

// Errors of a Store. Any other error is a failure of the store itself.
var (
	// ErrNotFound: no task under the key, or it expired.
	ErrNotFound = errors.New("task: not found")
	// ErrExists: Create found a task under the key already.
	ErrExists = errors.New("task: a task with this key exists")
	// ErrNotOwner: the caller's lease is not the task's (it lapsed and the
	// task failed, or another owner holds it), or the task is terminal.
	ErrNotOwner = errors.New("task: the caller does not hold the task's lease")
	// ErrKeyReused: Ask named an input request key this task used before;
	// a key names one request over the task's whole life.
	ErrKeyReused = errors.New("task: an input request key is used twice in one task")
	// ErrFull: a bounded store holds as many tasks as it may.
	ErrFull = errors.New("task: the store is full")
)

// LapsedError is the JSON-RPC error a task gets when its owner's lease
// lapsed (the node running it stopped): -32603.
var LapsedError = json.RawMessage(`{"code":-32603,"message":"the server running the task stopped before it finished"}`)

// LapsedMessage is the statusMessage of a task whose lease lapsed.
const LapsedMessage = "the server running the task stopped before it finished"

// Store keeps tasks, for one node (Memory) or many (package redistask).
// Every method decides atomically, so any number of goroutines and
// processes may share one store; the contract suite in package tasktest
// states and checks what each must do. Times come from the caller, so
// that a store needs no clock of its own.
type Store interface {
	// Create stores r under k, with r.Owner holding its lease until
	// r.LeaseUntil. It returns only once a Get on any node would find the
	// task (on a replicated store: acknowledged as the store's
	// acknowledgement rules say). ErrExists if k is taken.
	Create(ctx context.Context, k Key, r *Record) error
	// Get returns the task under k, ErrNotFound if there is none. A task
	// that is not terminal and whose lease lapsed before now turns Failed
	// (with LapsedError) by compare-and-set first.
	Get(ctx context.Context, k Key, now time.Time) (*Record, error)
	// Touch renews owner's lease and may set the status message. It
	// returns the task's status: a terminal one (the task was cancelled,
	// or failed when the lease lapsed) changes nothing and tells the
	// owner to stop. ErrNotOwner when another owner holds it.
	Touch(ctx context.Context, k Key, owner string, t Touch) (Status, error)
	// Ask adds reqs to the outstanding input requests and sets the status
	// InputRequired. ErrKeyReused, changing nothing, if any key was ever
	// asked in this task; ErrNotOwner if owner does not hold the task or
	// it is terminal.
	Ask(ctx context.Context, k Key, owner string, reqs map[string]json.RawMessage, now time.Time) error
	// Answer takes each answer whose key is outstanding, once: the key
	// stops being outstanding and the answer waits for the owner's
	// Collect. Answers under any other key (never asked, answered before,
	// or the task is terminal) are ignored. When no key is left
	// outstanding the status turns Working. It returns the keys taken.
	Answer(ctx context.Context, k Key, answers map[string]json.RawMessage, now time.Time) ([]string, error)
	// Collect removes and returns the answers taken for keys and not yet
	// collected. ErrNotOwner if owner does not hold the task.
	Collect(ctx context.Context, k Key, owner string, keys []string) (map[string]json.RawMessage, error)
	// Finish sets a terminal state by compare-and-set: only a task that
	// is not terminal changes, and with owner non-empty only while owner
	// holds it. It reports whether it changed the task; outstanding
	// requests and waiting answers are dropped.
	Finish(ctx context.Context, k Key, owner string, e End) (bool, error)
}
