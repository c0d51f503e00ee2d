// Package replaytest checks that an implementation of [replay.Store] keeps
// the contract documented in package replay. Every store, in memory or on a
// server, runs the same suite:
//
//	func TestContract(t *testing.T) {
//		replaytest.Run(t, func(t *testing.T) replaytest.Fixture {
//			clk := newFakeClock()
//			return replaytest.Fixture{
//				Store:   replay.NewMemory(&replay.MemoryOptions{Lease: time.Minute, Now: clk.Now}),
//				Now:     clk.Now,
//				Advance: clk.Advance,
//				Lease:   time.Minute,
//			}
//		})
//	}
//
// # Time
//
// The suite never measures time. It reads the store's clock through
// Fixture.Now to build token expiries, and moves it with Fixture.Advance to
// make leases and expiries pass. A store with an injectable clock hands the
// suite a fake one, and the whole suite runs in microseconds.
//
// A store that judges deadlines by a clock it does not let the test control,
// such as a Redis server's, is configured with a short lease (say 100ms) and
// hands the suite time.Now and a func that sleeps at least d. A subtest then
// sleeps at most a few leases. Now must agree with the store's clock to within
// a quarter of the lease, which holds for a server on the same host: the suite
// waits a quarter lease past every deadline it needs to have passed. A sleep
// that overshoots does no harm: after an Advance the suite expects deadlines
// to have passed, never to lie ahead, except one that is over two leases away.
//
// # Isolation
//
// Every subtest calls newFixture once and calls t.Parallel, so fixtures must
// not share a fake clock. Fixtures may share a backend (one Redis database,
// say): each subtest uses fresh random ids shaped like real token ids.
//
// # Beyond Run
//
// [RaceReserve] is the suite's race of concurrent Reserves of one id, for a
// store to run more often or wider than Run does.
package replaytest
