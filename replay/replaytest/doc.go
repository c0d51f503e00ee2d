// Package replaytest checks that an implementation of [replay.Store] keeps
// the contract documented in package replay. Every store, in memory or on a
// server, runs the same suite:
//
//	func TestContract(t *testing.T) {
//		replaytest.Run(t, func(t *testing.T) replaytest.Fixture {
//			clk := newFakeClock()
//			return replaytest.Fixture{
//				Store:   replay.NewMemory(&replay.MemoryOptions{Now: clk.Now}),
//				Now:     clk.Now,
//				Advance: clk.Advance,
//			}
//		})
//	}
//
// # Time
//
// The suite never measures or waits for time. It reads the store's clock
// through Fixture.Now to build token expiries (an hour ahead), and moves it
// with Fixture.Advance to make them pass; every deadline it checks lies at
// least a minute from the moment it checks. A store with an injectable
// clock hands the suite a fake one, and the whole suite runs in
// microseconds.
//
// A store that judges deadlines by a clock it does not let the test control,
// such as a Redis server's, ages its entries in Advance instead: package
// redisstore's tests shorten the lifetime of every key of the subtest's
// prefix by d on the server, and delete the keys whose lifetime runs out, so
// the server's own expiry decides, without a sleep. Its entries also age in
// real time, which only matters if a subtest takes more than a minute.
//
// # What it checks beyond the basics
//
// A reservation has no lease: held two minutes and one second (the lease of
// earlier versions), never committed, committed with a context that fails the
// Commit, or committed after an hour, it excludes every other Reserve until
// the expiry it was given; only Release frees it early.
//
// # Isolation
//
// Every subtest calls newFixture once and calls t.Parallel, so fixtures must
// not share a fake clock. Fixtures may share a backend (one Redis database,
// say): each subtest uses fresh random ids shaped like real token ids. An
// Advance that ages entries on a shared backend must age only its own
// fixture's (redisstore's tests give each fixture its own key prefix).
//
// # Beyond Run
//
// [RaceReserve] is the suite's race of concurrent Reserves of one id, for a
// store to run more often or wider than Run does.
package replaytest
