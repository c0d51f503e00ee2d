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

	// Advance moves the store's clock forward by d. The suite moves it by
	// minutes and hours and never measures wall-clock time, so Advance must
	// not sleep: a store judged by a server's clock ages the server's
	// entries instead (package redisstore's tests shorten every key's
	// expiry by d).
	Advance func(d time.Duration)
}

// The suite's time scale. Tokens live for tokenLife; every deadline the
// suite relies on lies at least margin away from the moment it checks, so a
// store whose entries also age in real time (a Redis server) would have to
// take longer than margin over one subtest to fail it.
const (
	tokenLife = time.Hour
	margin    = time.Minute
	// oldLease is the lease that reservations had before they were made to
	// last until the token's expiry. A reservation held past it must still
	// exclude every other Reserve.
	oldLease = 2 * time.Minute
)

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
		{"HeldPastOldLease", testHeldPastOldLease},
		{"NeverSettledHeldUntilExpiry", testNeverSettled},
		{"FailedCommitHeldUntilExpiry", testFailedCommit},
		{"SlowHandlerCommits", testSlowHandlerCommits},
		{"SlowHandlerReleases", testSlowHandlerReleases},
		{"StaleReleaseAfterExpiry", testStaleReleaseAfterExpiry},
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
			if f.Store == nil || f.Now == nil || f.Advance == nil {
				t.Fatal("replaytest: incomplete Fixture: Store, Now and Advance are required")
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

// exp is the expiry of a token issued now.
func (s *suite) exp() time.Time { return s.f.Now().Add(tokenLife) }

// untilBefore advances the clock to margin before t.
func (s *suite) untilBefore(t time.Time) { s.f.Advance(t.Add(-margin).Sub(s.f.Now())) }

// untilAfter advances the clock to margin after t.
func (s *suite) untilAfter(t time.Time) { s.f.Advance(t.Add(margin).Sub(s.f.Now())) }

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
	id, exp := newID(t), s.exp()
	s.reserve(t, id, exp)
	s.refused(t, id, exp)
}

func testReleaseThenReserve(t *testing.T, s *suite) {
	id, exp := newID(t), s.exp()
	s.release(t, s.reserve(t, id, exp))
	s.reserve(t, id, exp)
}

func testCommitThenReserve(t *testing.T, s *suite) {
	id, exp := newID(t), s.exp()
	s.commit(t, s.reserve(t, id, exp), nil)
	s.refused(t, id, exp)
}

func testReleaseAfterCommit(t *testing.T, s *suite) {
	id, exp := newID(t), s.exp()
	r := s.reserve(t, id, exp)
	s.commit(t, r, nil)
	s.release(t, r) // a no-op: the id stays consumed
	s.refused(t, id, exp)
}

func testCommitAfterRelease(t *testing.T, s *suite) {
	id, exp := newID(t), s.exp()
	r := s.reserve(t, id, exp)
	s.release(t, r)
	s.commit(t, r, nil) // a no-op: the id stays free
	s.release(t, s.reserve(t, id, exp))
}

func testRepeatedCalls(t *testing.T, s *suite) {
	id, exp := newID(t), s.exp()
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

// A reservation has no lease: held past the two minutes reservations used to
// last, it still excludes every other Reserve.
func testHeldPastOldLease(t *testing.T, s *suite) {
	id, exp := newID(t), s.f.Now().Add(5*time.Minute)
	s.reserve(t, id, exp)
	s.f.Advance(oldLease + time.Second)
	s.refused(t, id, exp)
}

// A reservation whose holder never comes back (a crash between Reserve and
// Commit) keeps the id until the expiry, and frees it then.
func testNeverSettled(t *testing.T, s *suite) {
	id, exp := newID(t), s.exp()
	s.reserve(t, id, exp)
	s.untilBefore(exp)
	s.refused(t, id, exp)
	s.untilAfter(exp)
	s.reserve(t, id, s.exp())
}

// A Commit that fails (here: its context is canceled, which a store doing
// I/O must refuse, and a store that does none may ignore) leaves the id held
// until the expiry, as if it had succeeded.
func testFailedCommit(t *testing.T, s *suite) {
	id, exp := newID(t), s.exp()
	r := s.reserve(t, id, exp)
	canceled, cancel := context.WithCancel(s.ctx)
	cancel()
	if err := r.Commit(canceled); errors.Is(err, replay.ErrReplayed) {
		t.Fatalf("Commit with a canceled context = %v", err)
	}
	s.f.Advance(oldLease + time.Second)
	s.refused(t, id, exp)
	s.untilBefore(exp)
	s.refused(t, id, exp)
}

// A handler slower than any lease: its Commit still consumes the id, and
// nobody claimed it in the meantime.
func testSlowHandlerCommits(t *testing.T, s *suite) {
	id, exp := newID(t), s.exp()
	r := s.reserve(t, id, exp)
	s.f.Advance(oldLease + time.Second)
	s.refused(t, id, exp)
	s.untilBefore(exp)
	s.refused(t, id, exp)
	s.commit(t, r, nil)
	s.refused(t, id, exp)
}

// A slow handler that fails still frees the id with Release.
func testSlowHandlerReleases(t *testing.T, s *suite) {
	id, exp := newID(t), s.exp()
	r := s.reserve(t, id, exp)
	s.f.Advance(oldLease + time.Second)
	s.refused(t, id, exp)
	s.release(t, r)
	s.reserve(t, id, exp)
}

// A Release that comes after the token expired and the id was claimed anew
// under a later expiry leaves the new claim alone.
func testStaleReleaseAfterExpiry(t *testing.T, s *suite) {
	id, exp := newID(t), s.exp()
	first := s.reserve(t, id, exp)
	s.untilAfter(exp)
	later := s.exp()
	second := s.reserve(t, id, later)
	s.release(t, first) // stale: the id belongs to second now
	s.refused(t, id, later)
	s.release(t, second)
	s.reserve(t, id, later)
}

// A consumed id is kept until the token's expiry and then forgotten: the
// token itself is no longer accepted by then.
func testConsumedUntilExpiry(t *testing.T, s *suite) {
	id, exp := newID(t), s.exp()
	s.commit(t, s.reserve(t, id, exp), nil)
	s.f.Advance(oldLease + time.Second)
	s.refused(t, id, exp)
	s.untilBefore(exp)
	s.refused(t, id, exp)
	s.untilAfter(exp)
	s.reserve(t, id, s.exp())
}

// Committing after the token expired keeps nothing and is not an error.
func testCommitAfterExpiry(t *testing.T, s *suite) {
	id, exp := newID(t), s.exp()
	r := s.reserve(t, id, exp)
	s.untilAfter(exp)
	s.commit(t, r, nil)
	s.reserve(t, id, s.exp())
}

// Nothing can be claimed with an expiry that has passed, and trying stores
// nothing.
func testExpiredToken(t *testing.T, s *suite) {
	id := newID(t)
	s.refused(t, id, s.f.Now().Add(-margin))
	s.reserve(t, id, s.exp())
}

// Two resumes of one token racing each other never both get a reservation.
func testConcurrent(t *testing.T, s *suite) {
	RaceReserve(t, s.f.Store, newID(t), s.exp(), 32)
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
	a, b, exp := newID(t), newID(t), s.exp()
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
	id, exp := newID(t), s.exp()
	ctx, cancel := context.WithCancel(s.ctx)
	cancel()
	r, err := s.f.Store.Reserve(ctx, id, exp)
	if !errors.Is(err, context.Canceled) || r != nil {
		t.Fatalf("Reserve with a canceled context = %v, %v; want nil, context.Canceled", r, err)
	}
	s.reserve(t, id, exp)
}
