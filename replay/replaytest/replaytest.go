package replaytest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/replay"
)

// Fixture is one store under test and the clock it judges deadlines by.
type Fixture struct {
	// Store is the store under test.
	Store replay.Store

	// Now reports the current time on the store's clock.
	Now func() time.Time

	// Advance moves the store's clock forward by at least d. It may sleep.
	Advance func(d time.Duration)

	// Lease is the lease the store gives reservations. It must be positive.
	Lease time.Duration
}

// Run checks the [replay.Store] contract, calling newFixture once in every
// subtest. The subtests run in parallel with each other.
func Run(t *testing.T, newFixture func(t *testing.T) Fixture) {
	t.Helper()
	cases := []struct {
		name string
		run  func(t *testing.T, s *suite)
	}{
		{"ReserveTwice", testReserveTwice},
		{"ReleaseThenReserve", testReleaseThenReserve},
		{"CommitThenReserve", testCommitThenReserve},
		{"ReleaseAfterCommit", testReleaseAfterCommit},
		{"CommitAfterRelease", testCommitAfterRelease},
		{"RepeatedCalls", testRepeatedCalls},
		{"LeaseLapses", testLeaseLapses},
		{"CommitAfterLapse", testCommitAfterLapse},
		{"CommitAfterLapseAndReclaim", testCommitAfterLapseAndReclaim},
		{"LeaseEndsAtExpiry", testLeaseEndsAtExpiry},
		{"ConsumedUntilExpiry", testConsumedUntilExpiry},
		{"CommitAfterExpiry", testCommitAfterExpiry},
		{"ExpiredToken", testExpiredToken},
		{"Concurrent", testConcurrent},
		{"DistinctIDs", testDistinctIDs},
		{"CanceledContext", testCanceledContext},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			if f.Store == nil || f.Now == nil || f.Advance == nil || f.Lease <= 0 {
				t.Fatal("replaytest: incomplete Fixture: Store, Now, Advance and a positive Lease are required")
			}
			tc.run(t, &suite{f: f, ctx: t.Context()})
		})
	}
}

// suite holds one subtest's fixture and the helpers its checks share.
type suite struct {
	f   Fixture
	ctx context.Context
}

// margin is the slack the suite leaves around every deadline it relies on.
func (s *suite) margin() time.Duration { return s.f.Lease / 4 }

// far is an expiry that no subtest reaches.
func (s *suite) far() time.Time { return s.f.Now().Add(1000 * s.f.Lease) }

// lapse lets a lease lapse for certain.
func (s *suite) lapse() { s.f.Advance(s.f.Lease + s.margin()) }

func (s *suite) reserve(t *testing.T, id string, expires time.Time) replay.Reservation {
	t.Helper()
	r, err := s.f.Store.Reserve(s.ctx, id, expires)
	if err != nil {
		t.Fatalf("Reserve = %v, want a reservation", err)
	}
	if r == nil {
		t.Fatal("Reserve returned a nil Reservation and a nil error")
	}
	return r
}

func (s *suite) refused(t *testing.T, id string, expires time.Time) {
	t.Helper()
	r, err := s.f.Store.Reserve(s.ctx, id, expires)
	if !errors.Is(err, replay.ErrReplayed) {
		t.Fatalf("Reserve = %v, want ErrReplayed", err)
	}
	if r != nil {
		t.Fatal("Reserve returned a Reservation with an error")
	}
}

func (s *suite) commit(t *testing.T, r replay.Reservation, want error) {
	t.Helper()
	if err := r.Commit(s.ctx); !errors.Is(err, want) {
		t.Fatalf("Commit = %v, want %v", err, want)
	}
}

func (s *suite) release(t *testing.T, r replay.Reservation) {
	t.Helper()
	if err := r.Release(s.ctx); err != nil {
		t.Fatalf("Release = %v, want nil", err)
	}
}

// newID returns a fresh random id shaped like a token's jti: 128 random bits
// in 22 base64url characters.
func newID(t *testing.T) string {
	t.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func testReserveTwice(t *testing.T, s *suite) {
	id, exp := newID(t), s.far()
	s.reserve(t, id, exp)
	s.refused(t, id, exp)
}

func testReleaseThenReserve(t *testing.T, s *suite) {
	id, exp := newID(t), s.far()
	s.release(t, s.reserve(t, id, exp))
	s.reserve(t, id, exp)
}

func testCommitThenReserve(t *testing.T, s *suite) {
	id, exp := newID(t), s.far()
	s.commit(t, s.reserve(t, id, exp), nil)
	s.refused(t, id, exp)
	s.lapse() // a consumed id outlives the lease
	s.refused(t, id, exp)
}

func testReleaseAfterCommit(t *testing.T, s *suite) {
	id, exp := newID(t), s.far()
	r := s.reserve(t, id, exp)
	s.commit(t, r, nil)
	s.release(t, r) // a no-op: the id stays consumed
	s.refused(t, id, exp)
}

func testCommitAfterRelease(t *testing.T, s *suite) {
	id, exp := newID(t), s.far()
	r := s.reserve(t, id, exp)
	s.release(t, r)
	s.commit(t, r, nil) // a no-op: the id stays free
	s.release(t, s.reserve(t, id, exp))
}

func testRepeatedCalls(t *testing.T, s *suite) {
	id, exp := newID(t), s.far()
	r := s.reserve(t, id, exp)
	s.commit(t, r, nil)
	s.commit(t, r, nil)
	s.refused(t, id, exp)

	id = newID(t)
	r = s.reserve(t, id, exp)
	s.release(t, r)
	s.release(t, r)
	s.reserve(t, id, exp)
}

// A reservation whose holder never comes back (a crash between Reserve and
// Commit) lapses, and its late Release must not free the next claim.
func testLeaseLapses(t *testing.T, s *suite) {
	id, exp := newID(t), s.far()
	first := s.reserve(t, id, exp)
	s.lapse()
	second := s.reserve(t, id, exp)
	s.release(t, first) // stale: the id belongs to second now
	s.refused(t, id, exp)
	s.release(t, second)
	s.reserve(t, id, exp)
}

// A handler that outlived its lease still consumes the id if nobody claimed
// it in the meantime.
func testCommitAfterLapse(t *testing.T, s *suite) {
	id, exp := newID(t), s.far()
	r := s.reserve(t, id, exp)
	s.lapse()
	s.commit(t, r, nil)
	s.refused(t, id, exp)
}

// If the id was claimed again after the lease lapsed, a late Commit reports
// ErrReplayed and still leaves the id consumed, whatever the second claim
// then does.
func testCommitAfterLapseAndReclaim(t *testing.T, s *suite) {
	t.Run("SecondReleases", func(t *testing.T) {
		id, exp := newID(t), s.far()
		first := s.reserve(t, id, exp)
		s.lapse()
		second := s.reserve(t, id, exp)
		s.commit(t, first, replay.ErrReplayed)
		s.release(t, second)
		s.refused(t, id, exp)
	})
	t.Run("SecondCommits", func(t *testing.T) {
		id, exp := newID(t), s.far()
		first := s.reserve(t, id, exp)
		s.lapse()
		second := s.reserve(t, id, exp)
		s.commit(t, first, replay.ErrReplayed)
		s.commit(t, second, replay.ErrReplayed)
		s.refused(t, id, exp)
	})
}

// A lease never outlives the token's expiry.
func testLeaseEndsAtExpiry(t *testing.T, s *suite) {
	id := newID(t)
	s.reserve(t, id, s.f.Now().Add(s.f.Lease/2))
	s.f.Advance(s.f.Lease/2 + s.margin()) // past the expiry, within the lease
	s.reserve(t, id, s.far())
}

// A consumed id is kept until the token's expiry and then forgotten: the
// token itself is no longer accepted by then.
func testConsumedUntilExpiry(t *testing.T, s *suite) {
	id := newID(t)
	exp := s.f.Now().Add(4 * s.f.Lease)
	s.commit(t, s.reserve(t, id, exp), nil)
	s.lapse() // past the lease, well before the expiry
	s.refused(t, id, exp)
	s.f.Advance(3 * s.f.Lease) // past the expiry
	s.reserve(t, id, s.far())
}

// Committing after the token expired keeps nothing and is not an error.
func testCommitAfterExpiry(t *testing.T, s *suite) {
	id := newID(t)
	r := s.reserve(t, id, s.f.Now().Add(s.f.Lease/2))
	s.f.Advance(s.f.Lease/2 + s.margin())
	s.commit(t, r, nil)
	s.reserve(t, id, s.far())
}

// Nothing can be claimed with an expiry that has passed, and trying stores
// nothing.
func testExpiredToken(t *testing.T, s *suite) {
	id := newID(t)
	s.refused(t, id, s.f.Now().Add(-s.margin()))
	s.reserve(t, id, s.far())
}

// Two resumes of one token racing each other never both get a reservation.
func testConcurrent(t *testing.T, s *suite) {
	RaceReserve(t, s.f.Store, newID(t), s.far(), 32)
}

// RaceReserve has n goroutines call store.Reserve for id at the same
// moment and fails t unless exactly one gets a Reservation and every other
// gets replay.ErrReplayed. Run uses it once; a store can call it more
// often, or with n larger, where races are its own concern (for example
// many clients of one server).
func RaceReserve(t testing.TB, store replay.Store, id string, expires time.Time, n int) {
	t.Helper()
	var (
		start sync.WaitGroup
		done  sync.WaitGroup
		mu    sync.Mutex
		won   int
		errs  []error
	)
	start.Add(1)
	for range n {
		done.Go(func() {
			start.Wait()
			r, err := store.Reserve(t.Context(), id, expires)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && r != nil:
				won++
			case !errors.Is(err, replay.ErrReplayed):
				errs = append(errs, err)
			}
		})
	}
	start.Done()
	done.Wait()
	if won != 1 || len(errs) != 0 {
		t.Fatalf("%d concurrent Reserves of one id: %d won, unexpected errors %v; want exactly 1 winner and ErrReplayed for the rest", n, won, errs)
	}
}

func testDistinctIDs(t *testing.T, s *suite) {
	a, b, exp := newID(t), newID(t), s.far()
	ra := s.reserve(t, a, exp)
	rb := s.reserve(t, b, exp)
	s.commit(t, ra, nil)
	s.release(t, rb)
	s.refused(t, a, exp)
	s.reserve(t, b, exp)
}

// A canceled context fails Reserve with the context's error and claims
// nothing.
func testCanceledContext(t *testing.T, s *suite) {
	id, exp := newID(t), s.far()
	ctx, cancel := context.WithCancel(s.ctx)
	cancel()
	r, err := s.f.Store.Reserve(ctx, id, exp)
	if !errors.Is(err, context.Canceled) || r != nil {
		t.Fatalf("Reserve with a canceled context = %v, %v; want nil, context.Canceled", r, err)
	}
	s.reserve(t, id, exp)
}
