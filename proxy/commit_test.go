package proxy_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
)

// heldStore is a store that waits on I/O, as Redis does (it is not
// replay.NonBlocking): a Memory store whose Commit waits until the test
// lets it go on.
type heldStore struct {
	m         *replay.Memory // a field, not embedded: heldStore is not NonBlocking
	commitGo  chan struct{}
	committed atomic.Int32
}

func (s *heldStore) Reserve(ctx context.Context, id string, expires time.Time) (replay.Reservation, error) {
	r, err := s.m.Reserve(ctx, id, expires)
	if err != nil {
		return nil, err
	}
	return &heldReservation{r, s}, nil
}

type heldReservation struct {
	replay.Reservation
	s *heldStore
}

func (r *heldReservation) Commit(ctx context.Context) error {
	select {
	case <-r.s.commitGo:
	case <-time.After(10 * time.Second): // only ever reached by a proxy that waits on the commit
	}
	defer r.s.committed.Add(1)
	return r.Reservation.Commit(ctx)
}

// With a store that waits on I/O, the response to a resume does not wait
// for its commit: the reservation already spends the token until it
// expires, so the same token is refused as replayed while the commit is
// still on its way, and after it.
func TestCommitOffResponsePath(t *testing.T) {
	up := promptUpstream(t)
	st := &heldStore{m: replay.NewMemory(nil), commitGo: make(chan struct{})}
	px := startProxy(t, up.url(), nil, &mrtr.Options{Store: st, StoreTimeout: time.Minute}, nil)
	tok := send(t, px.URL, rpcBody(1, "prompts/get", `"name":"p"`), nil).state()
	r := send(t, px.URL, resumeBody(2, "prompts/get", "p", "", tok), nil)
	if r.resultType() != "complete" {
		t.Fatalf("resume: %s", r.raw)
	}
	if n := st.committed.Load(); n != 0 {
		t.Fatalf("the response waited for the commit (%d done)", n)
	}
	wantReject(t, send(t, px.URL, resumeBody(3, "prompts/get", "p", "", tok), nil), "replayed")
	close(st.commitGo)
}

// localStore is heldStore's opposite: a store whose Commit returns without
// waiting (replay.LocalCommit, as Redis with Replicas 0), while it is not
// NonBlocking. Its Commit records the goroutine it ran on.
type localStore struct {
	m          *replay.Memory
	mu         sync.Mutex
	commitGoID []uint64
}

func (s *localStore) LocalCommit() bool { return true }

func (s *localStore) Reserve(ctx context.Context, id string, expires time.Time) (replay.Reservation, error) {
	r, err := s.m.Reserve(ctx, id, expires)
	if err != nil {
		return nil, err
	}
	return &localReservation{r, s}, nil
}

type localReservation struct {
	replay.Reservation
	s *localStore
}

func (r *localReservation) Commit(ctx context.Context) error {
	r.s.mu.Lock()
	r.s.commitGoID = append(r.s.commitGoID, goID())
	r.s.mu.Unlock()
	return r.Reservation.Commit(ctx)
}

// goID returns the running goroutine's number, from its stack's header
// ("goroutine 12 [running]:").
func goID() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := strings.Fields(string(buf))
	n, _ := strconv.ParseUint(f[1], 10, 64)
	return n
}

// With a store whose commit waits on nothing, the proxy commits a resume
// in line, on the request's own goroutine: a goroutine per resume would
// cost more than the commit.
func TestLocalCommitInLine(t *testing.T) {
	up := promptUpstream(t)
	st := &localStore{m: replay.NewMemory(nil)}
	h, err := proxy.New(proxy.Options{Upstream: up.url(), Guard: mrtr.New(reqstate.New(testRing(t), nil), &mrtr.Options{Store: st})})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var handlerIDs []uint64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		handlerIDs = append(handlerIDs, goID())
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	tok := send(t, srv.URL, rpcBody(1, "prompts/get", `"name":"p"`), nil).state()
	if r := send(t, srv.URL, resumeBody(2, "prompts/get", "p", "", tok), nil); r.resultType() != "complete" {
		t.Fatalf("resume: %s", r.raw)
	}
	mu.Lock()
	defer mu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.commitGoID) != 1 || len(handlerIDs) != 2 || st.commitGoID[0] != handlerIDs[1] {
		t.Fatalf("commit on goroutines %v, the resume's handler on %v: not in line", st.commitGoID, handlerIDs[1:])
	}
}

// countingStore is a single-use store that counts its reservations.
type countingStore struct {
	replay.Store
	n atomic.Int64
}

func (c *countingStore) Reserve(ctx context.Context, id string, expires time.Time) (replay.Reservation, error) {
	c.n.Add(1)
	return c.Store.Reserve(ctx, id, expires)
}

// TestTaskIDNotSingleUse: a task id is polled, answered and cancelled as
// often as the caller likes; it never enters the single-use store.
func TestTaskIDNotSingleUse(t *testing.T) {
	up := newTaskUpstream(t, false)
	store := &countingStore{Store: replay.NewMemory(nil)}
	px := taskProxy(t, up.url(), nil, &mrtr.Options{Store: store})
	id := create(t, px.URL, "alice")
	for range 3 {
		for _, m := range []string{task.MethodGet, task.MethodUpdate, task.MethodGet, task.MethodCancel} {
			if r := taskCall(t, px.URL, "alice", m, id, true); r.err != nil {
				t.Fatalf("%s: %s", m, r.raw)
			}
		}
	}
	if n := store.n.Load(); n != 0 {
		t.Fatalf("the single-use store was asked %d times, want never", n)
	}
}
