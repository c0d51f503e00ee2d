package proxy_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/replay"
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
