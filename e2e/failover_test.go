package e2e

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/testing/testredis"
)

// The failover tests of issue 14: two `mrtr serve` nodes share a Sentinel
// or Cluster deployment of real redis-server processes; clients run deploy
// flows, each resume sent twice at once (once to each node), and the test
// kills a primary with SIGKILL in the middle of it. It then counts, for
// --replay-replicas 0 and 1, the tokens whose handler ran twice, the resumes
// refused (-32603, the store could not decide) and when, and checks that
// every flow nobody refused completed, exactly once.
//
// The load is bounded by flow counts, not by time: failoverWarmup flows
// before the kill, failoverAfter flows after the failover. Longer runs:
//
//	go test ./e2e -run TestFailover -count=1 -v -failover.flows 2000 -failover.workers 16
var (
	failoverFlows   = flag.Int("failover.flows", 60, "flows each failover test runs before the kill and again after the failover")
	failoverWorkers = flag.Int("failover.workers", 8, "concurrent clients in each failover test")
)

// failoverReplayTimeout is the nodes' --replay-timeout. A claim waits up to
// half of it for replicas; it is long so that a machine busy with other
// work (two cores, several test binaries) does not make a replica miss it
// outside the failover.
const failoverReplayTimeout = "4s"

// failoverProbes is how many resumes in a row each node must serve after
// the failover for the test to call the window over.
const failoverProbes = 12

// failoverSetup is one deployment under test: the --replay URL, and how to
// kill a primary and wait until the deployment serves again.
type failoverSetup struct {
	url string
	// kill kills a primary (SIGKILL) and returns its address.
	kill func(t *testing.T) string
	// recover waits, by the deployment's own signs (SENTINEL, CLUSTER
	// INFO), until it has a primary with a replica in sync for every key.
	recover func(t *testing.T, killed string)
}

// failoverOutcome is what one failover run measured.
type failoverOutcome struct {
	replicas                   int
	flows, completed, refused  int
	ranTwiceAtOnce, ranAgain   int           // both duplicates ran; a replay after the failover ran
	replayed                   int           // resumes refused as replayed (duplicates, replays)
	storeErrors                int           // resumes refused with -32603
	firstRefusal, lastRefusal  time.Duration // resumes sent this long after the kill were refused
	refusedBeforeKill          int
	refusedAfterRecovery       int           // resumes refused (-32603) once the deployment reported itself recovered
	failoverDone               time.Duration // kill to a resume going through on each node again
	completedAfterLastRefusal  int
	failures                   []string
	elapsedBefore, elapsedPost time.Duration
}

func (o failoverOutcome) ranTwice() int { return o.ranTwiceAtOnce + o.ranAgain }

func (o failoverOutcome) String() string {
	return fmt.Sprintf("--replay-replicas %d: %d flows, %d completed, %d refused (store could not decide); ran twice: %d (%d at once, %d replayed after the failover); "+
		"-32603 resumes %d, first %v and last %v after the kill; failover done %v after the kill; %d flows completed after the last refusal",
		o.replicas, o.flows, o.completed, o.refused, o.ranTwice(), o.ranTwiceAtOnce, o.ranAgain,
		o.storeErrors, o.firstRefusal.Round(time.Millisecond), o.lastRefusal.Round(time.Millisecond),
		o.failoverDone.Round(time.Millisecond), o.completedAfterLastRefusal)
}

// TestFailoverSentinel: one primary, two replicas, three sentinels.
func TestFailoverSentinel(t *testing.T) {
	outcomes := map[int]failoverOutcome{}
	for _, replicas := range []int{1, 0} {
		t.Run(fmt.Sprintf("Replicas%d", replicas), func(t *testing.T) {
			ss := testredis.StartSentinel(t, 2, 3)
			setup := failoverSetup{
				url: ss.URL(),
				kill: func(t *testing.T) string {
					addr, err := ss.MasterAddr(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					ss.ServerAt(addr).Kill()
					return addr
				},
				recover: func(t *testing.T, killed string) { ss.WaitFailover(t, killed, 1); ss.WaitAgreement(t, killed) },
			}
			outcomes[replicas] = failoverRun(t, setup, replicas)
		})
	}
	failoverReport(t, "Sentinel (1 primary, 2 replicas, 3 sentinels)", outcomes)
}

// TestFailoverSentinelLagged is TestFailoverSentinel with the replicas
// behind a replication link that delivers the primary's writes
// failoverLag late and loses what is in flight when the primary dies, as
// across a slow network from a host that crashes. Here --replay-replicas 0
// loses the claims of the last moments before the kill, and their tokens
// run again; 1 loses none.
func TestFailoverSentinelLagged(t *testing.T) {
	outcomes := map[int]failoverOutcome{}
	for _, replicas := range []int{1, 0} {
		t.Run(fmt.Sprintf("Replicas%d", replicas), func(t *testing.T) {
			ss := testredis.StartSentinelLagged(t, 2, 3, failoverLag)
			setup := failoverSetup{
				url: ss.URL(),
				kill: func(t *testing.T) string {
					addr, err := ss.MasterAddr(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					ss.ServerAt(addr).Kill()
					return addr
				},
				recover: func(t *testing.T, killed string) { ss.WaitFailover(t, killed, 1); ss.WaitAgreement(t, killed) },
			}
			outcomes[replicas] = failoverRun(t, setup, replicas)
		})
	}
	failoverReport(t, fmt.Sprintf("Sentinel, replication lagging %v (1 primary, 2 replicas, 3 sentinels)", failoverLag), outcomes)
}

// clientConvergence is how long after the deployment recovered (every
// sentinel names the new primary, and each node served failoverProbes
// resumes in a row) a refusal still counts as part of the failover: a
// node's other pooled connections, and dials that asked a sentinel just
// before it switched, can still reach the dead primary for a few hundred
// milliseconds (seen: up to 0.3 s on a loaded 2-core machine). Such
// refusals fail closed; a refusal later than this is a failure.
const clientConvergence = time.Second

// failoverLag is the one-way delay of the replication links of
// TestFailoverSentinelLagged: a cross-zone link, or a busy one.
const failoverLag = 30 * time.Millisecond

// TestFailoverCluster: three primaries with a replica each. The killed
// primary's replica takes its slots over; the killed node is then restarted
// and rejoins as the new primary's replica, so that every slot has a
// replica to acknowledge claims again.
func TestFailoverCluster(t *testing.T) {
	outcomes := map[int]failoverOutcome{}
	for _, replicas := range []int{1, 0} {
		t.Run(fmt.Sprintf("Replicas%d", replicas), func(t *testing.T) {
			cl := testredis.StartCluster(t, 3, 1)
			var killedNode *testredis.Server
			setup := failoverSetup{
				url: cl.URL(),
				kill: func(t *testing.T) string {
					killedNode = cl.Primaries(t)[0]
					killedNode.Kill()
					return killedNode.Addr()
				},
				recover: func(t *testing.T, killed string) {
					cl.WaitOK(t)
					killedNode.Start()
					cl.WaitOK(t)
				},
			}
			outcomes[replicas] = failoverRun(t, setup, replicas)
		})
	}
	failoverReport(t, "Cluster (3 primaries, 1 replica each)", outcomes)
}

// failoverReport logs the outcomes side by side and checks what each
// setting promises: with 1, no token ran twice.
func failoverReport(t *testing.T, name string, outcomes map[int]failoverOutcome) {
	t.Helper()
	t.Logf("%s, %d workers, %d flows before the kill and %d after the failover:", name, *failoverWorkers, *failoverFlows, *failoverFlows)
	t.Logf("| --replay-replicas | flows | completed | refused | ran twice | -32603 resumes | refusals from .. to (after kill) | failover done after | flows/s before | flows/s after |")
	t.Logf("| ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
	for _, r := range []int{0, 1} {
		o, ok := outcomes[r]
		if !ok {
			continue
		}
		t.Logf("| %d | %d | %d | %d | %d | %d | %v .. %v | %v | %.0f | %.0f |", r, o.flows, o.completed, o.refused, o.ranTwice(), o.storeErrors,
			o.firstRefusal.Round(time.Millisecond), o.lastRefusal.Round(time.Millisecond), o.failoverDone.Round(time.Millisecond),
			float64(*failoverFlows)/o.elapsedBefore.Seconds(), float64(*failoverFlows)/o.elapsedPost.Seconds())
	}
}

// failoverFlow is one flow's record.
type failoverFlow struct {
	svc, state string
	successes  int
	done       time.Time
}

// failoverRun starts two nodes on setup with --replay-replicas replicas,
// runs the load, kills a primary, waits for recovery, runs the load again,
// replays every token that completed, and checks the outcome.
func failoverRun(t *testing.T, setup failoverSetup, replicas int) failoverOutcome {
	t.Helper()
	keys := mnKeyRing(t, "k1")
	args := mnClusterArgs(setup.url, "--keys", keys, "--replay-replicas", fmt.Sprint(replicas), "--replay-timeout", failoverReplayTimeout)
	a := mnStartNode(t, "A", nil, args...)
	b := mnStartNode(t, "B", nil, args...)

	type worker struct{ pause, ra, rb *mnClient }
	workers := make([]worker, *failoverWorkers)
	for i := range workers {
		hc := &http.Client{Transport: mnTransport(t)}
		ca, cb := mnConnect(t, a.url(), hc), mnConnect(t, b.url(), hc)
		workers[i] = worker{pause: []*mnClient{ca, cb}[i%2], ra: ca, rb: cb}
	}

	var (
		mu        sync.Mutex
		out       = failoverOutcome{replicas: replicas}
		flows     []*failoverFlow
		killedAt  atomic.Pointer[time.Time]
		refusals  []time.Time
		recovered atomic.Pointer[time.Time] // the deployment's own signs of recovery seen
		next      atomic.Int64
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(out.failures) < 20 {
			out.failures = append(out.failures, fmt.Sprintf(format, args...))
		}
	}
	// run plays n flows on the workers, each resume sent to both nodes at
	// once.
	run := func(n int) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		stop := next.Load() + int64(n)
		for _, w := range workers {
			wg.Go(func() {
				for {
					k := next.Add(1)
					if k > stop {
						return
					}
					svc := fmt.Sprintf("svc-%d", k)
					state, err := w.pause.pauseDeploy(ctx, svc)
					if err != nil {
						fail("%s: round 1: %v", svc, err)
						continue
					}
					f := &failoverFlow{svc: svc, state: state}
					var results [2]error
					var texts [2]string
					var rw sync.WaitGroup
					sent := time.Now()
					for i, c := range []*mnClient{w.ra, w.rb} {
						rw.Go(func() { texts[i], results[i] = c.resumeDeploy(ctx, svc, state) })
					}
					rw.Wait()
					now := time.Now()
					storeErr := false
					mu.Lock()
					out.flows++
					for i, err := range results {
						switch je, reason, ok := mnRPCError(err); {
						case err == nil && texts[i] == mnDeployed(svc):
							f.successes++
						case err == nil:
							out.failures = append(out.failures, fmt.Sprintf("%s: resume on %s: text %q", svc, "AB"[i:i+1], texts[i]))
						case ok && je.Code == -32602 && reason == "replayed":
							out.replayed++
						case ok && je.Code == -32603:
							out.storeErrors++
							storeErr = true
						default:
							out.failures = append(out.failures, fmt.Sprintf("%s: resume on %s: %v", svc, "AB"[i:i+1], err))
						}
					}
					if storeErr {
						// A refusal belongs to the moment its resume was
						// sent: one sent during the failover may be
						// answered after it, once --replay-timeout ran out.
						refusals = append(refusals, sent)
						switch {
						case killedAt.Load() == nil || now.Before(*killedAt.Load()):
							out.refusedBeforeKill++
						case recovered.Load() != nil && sent.After(recovered.Load().Add(clientConvergence)):
							out.refusedAfterRecovery++
						}
					}
					f.done = now
					switch f.successes {
					case 0:
						out.refused++
					case 1:
						out.completed++
					default:
						out.completed++
						out.ranTwiceAtOnce++
					}
					if f.successes > 0 {
						flows = append(flows, f)
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}

	begin := time.Now()
	run(*failoverFlows)
	out.elapsedBefore = time.Since(begin)

	// Kill the primary while flows run: the load goes on in the
	// background until the deployment has recovered and another batch of
	// flows ran.
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		run(*failoverFlows)
	}()
	kt := time.Now()
	killedAt.Store(&kt)
	killed := setup.kill(t)
	setup.recover(t, killed)
	// The deployment has recovered; the nodes' clients learn of it a
	// moment later (go-redis hears of a new primary from a sentinel, or
	// reloads the slot map). The window ends when each node has served
	// failoverProbes resumes in a row: tokens land on random slots, so in a
	// Cluster of three that misses the failed-over primary's slots with a
	// chance of (2/3)^12, under 1%.
	probe := workers[0]
	for i, c := range []*mnClient{probe.ra, probe.rb} {
		deadline := time.Now().Add(time.Minute)
		for k, ok := 0, 0; ok < failoverProbes; k++ {
			svc := fmt.Sprintf("probe-%d-%d", i, k)
			state, err := probe.pause.pauseDeploy(context.Background(), svc)
			if err == nil {
				_, err = c.resumeDeploy(context.Background(), svc, state)
			}
			ok++
			if err != nil {
				ok = 0
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s serves no %d resumes in a row a minute after the failover: %v", "AB"[i:i+1], failoverProbes, err)
			}
		}
	}
	rt := time.Now()
	recovered.Store(&rt)
	out.failoverDone = rt.Sub(kt)
	<-loadDone
	postStart := time.Now()
	run(*failoverFlows)
	out.elapsedPost = time.Since(postStart)

	// Every token that ran is replayed once more, on the other node than
	// its pause, on the deployment as the failover left it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var ix atomic.Int64
	ix.Store(-1)
	for _, w := range workers {
		wg.Go(func() {
			for {
				i := int(ix.Add(1))
				if i >= len(flows) {
					return
				}
				f := flows[i]
				text, err := w.rb.resumeDeploy(ctx, f.svc, f.state)
				mu.Lock()
				switch je, reason, ok := mnRPCError(err); {
				case err == nil && text == mnDeployed(f.svc):
					out.ranAgain++
				case ok && je.Code == -32602 && reason == "replayed":
					out.replayed++
				default:
					out.failures = append(out.failures, fmt.Sprintf("%s: replay after the failover: %v", f.svc, err))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	for _, r := range refusals {
		if r.After(kt) {
			if out.firstRefusal == 0 {
				out.firstRefusal = r.Sub(kt)
			}
			out.lastRefusal = max(out.lastRefusal, r.Sub(kt))
		}
	}
	last := kt.Add(out.lastRefusal)
	for _, f := range flows {
		if f.done.After(last) {
			out.completedAfterLastRefusal++
		}
	}

	t.Logf("%s (failover of %s: killed at %s, recovered at %s)", out, killed, kt.Format("15:04:05.000"), rt.Format("15:04:05.000"))
	if len(out.failures) > 0 {
		t.Errorf("%d flows failed in ways other than a refusal; first ones:\n%s", len(out.failures), strings.Join(out.failures, "\n"))
		for _, n := range []*mnNode{a, b} {
			t.Logf("node %s logged:\n%s", n.name, failoverProblems(n.logs(), 10))
		}
	}
	if out.refusedBeforeKill > 0 {
		t.Errorf("%d resumes refused with -32603 (answered) before the primary was killed", out.refusedBeforeKill)
	}
	if out.refusedAfterRecovery > 0 {
		t.Errorf("%d resumes refused with -32603 after the deployment had recovered (failover done %v after the kill)", out.refusedAfterRecovery, out.failoverDone)
	}
	if out.storeErrors > 0 && out.completedAfterLastRefusal == 0 {
		t.Errorf("no flow completed after the last refusal: the deployment did not serve again")
	}
	if out.completed+out.refused != out.flows {
		t.Errorf("%d flows, %d completed and %d refused: some were lost", out.flows, out.completed, out.refused)
	}
	if replicas >= 1 && out.ranTwice() > 0 {
		t.Errorf("--replay-replicas %d: %d tokens ran twice (%d at once, %d replayed after the failover), want 0", replicas, out.ranTwice(), out.ranTwiceAtOnce, out.ranAgain)
	}
	if t.Failed() && len(out.failures) == 0 {
		for _, n := range []*mnNode{a, b} {
			t.Logf("node %s logged:\n%s", n.name, failoverProblems(n.logs(), 10))
		}
	}
	return out
}

// failoverProblems is loadProblems without the rejections of replayed
// tokens, which the duplicated resumes cause by design.
func failoverProblems(log string, max int) string {
	var keep []string
	for line := range strings.Lines(log) {
		if !strings.Contains(line, `"reason":"replayed"`) {
			keep = append(keep, line)
		}
	}
	first := loadProblems(strings.Join(keep, ""), max)
	slices.Reverse(keep)
	last := strings.Split(loadProblems(strings.Join(keep, ""), max), "\n")
	slices.Reverse(last)
	return first + "\n...last ones:\n" + strings.Join(last, "\n")
}
