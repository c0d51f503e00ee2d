package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/internal/testing/testredis"
)

// The multi-node tests run two `mrtr serve` processes (the built binary)
// that share a key ring, a --server-id and one real redis-server started by
// package testredis, and drive them with go-sdk clients whose automatic
// Multi Round-Trip loop is off, so that one round of a flow can go to one
// node and the next round to the other. redis-server must be installed; CI
// sets MRTR_REQUIRE_REDIS=1 so that its absence fails these tests instead
// of skipping them.

// mnClusterArgs are the flags every node of a test cluster runs with. The
// store timeout is generous: on a loaded 2-core machine a Redis round trip
// under -race can exceed the 500 ms default, and a resume refused with
// -32603 there would be a false failure (the store-outage tests cover the
// timeout itself).
func mnClusterArgs(redisURL string, extra ...string) []string {
	return append([]string{"--server-id", mnServerID, "--replay", redisURL, "--replay-timeout", "5s"}, extra...)
}

// TestMultiNode pauses flows on one node and resumes them on the other,
// and races one token through 30 clients spread over both nodes.
func TestMultiNode(t *testing.T) {
	t.Parallel()
	redisURL := testredis.Start(t)
	keys := mnKeyRing(t, "k1")
	args := mnClusterArgs(redisURL, "--keys", keys)
	a := mnStartNode(t, "A", nil, args...)
	b := mnStartNode(t, "B", nil, args...)
	ca := mnConnect(t, a.url(), &http.Client{Transport: mnTransport(t)})
	cb := mnConnect(t, b.url(), &http.Client{Transport: mnTransport(t)})
	nodes := map[string]*mnClient{"A": ca, "B": cb}

	t.Run("PauseOnAResumeOnB", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, route := range [][2]string{{"A", "B"}, {"B", "A"}} {
			first, second := nodes[route[0]], nodes[route[1]]
			svc := "billing-" + strings.ToLower(route[0]+route[1])
			state, err := first.pauseDeploy(ctx, svc)
			if err != nil {
				t.Fatalf("round 1 on %s: %v", route[0], err)
			}
			text, err := second.resumeDeploy(ctx, svc, state)
			if err != nil {
				t.Fatalf("round 2 on %s of a flow paused on %s: %v", route[1], route[0], err)
			}
			if text != mnDeployed(svc) {
				t.Fatalf("round 2 on %s: text %q, want %q", route[1], text, mnDeployed(svc))
			}
			// The token is spent on both nodes: they share one record of
			// used tokens in Redis.
			for _, n := range []string{route[1], route[0]} {
				_, err := nodes[n].resumeDeploy(ctx, svc, state)
				mnWantReject(t, fmt.Sprintf("replay on %s of a token %s resumed", n, route[1]), err, "replayed")
			}
		}
	})

	t.Run("OneTokenThirtyClients", func(t *testing.T) {
		const clients = 30
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		racers := make([]*mnClient, clients)
		for i := range racers {
			n := a
			if i%2 == 1 {
				n = b
			}
			racers[i] = mnConnect(t, n.url(), &http.Client{Transport: mnTransport(t)})
		}
		// A few tokens, paused on either node, each raced by all 30.
		for round, pauser := range []string{"A", "B", "A"} {
			svc := fmt.Sprintf("ledger-%d", round)
			state, err := nodes[pauser].pauseDeploy(ctx, svc)
			if err != nil {
				t.Fatalf("round 1 on %s: %v", pauser, err)
			}
			type outcome struct {
				text string
				err  error
			}
			out := make([]outcome, clients)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i, c := range racers {
				wg.Go(func() {
					<-start
					out[i].text, out[i].err = c.resumeDeploy(ctx, svc, state)
				})
			}
			close(start)
			wg.Wait()

			var winners []string
			replayed := 0
			for i, o := range out {
				node := "AB"[i%2 : i%2+1]
				if o.err == nil {
					if o.text != mnDeployed(svc) {
						t.Errorf("token %d: client %d on %s: text %q, want %q", round, i, node, o.text, mnDeployed(svc))
					}
					winners = append(winners, fmt.Sprintf("client %d on %s", i, node))
					continue
				}
				je, reason, ok := mnRPCError(o.err)
				if ok && je.Code == -32602 && je.Message == "invalid requestState" && reason == "replayed" {
					replayed++
					continue
				}
				t.Errorf("token %d: client %d on %s: %v, want success or -32602 reason replayed", round, i, node, o.err)
			}
			if len(winners) != 1 || replayed != clients-1 {
				t.Fatalf("token %d (paused on %s): %d successes (%v) and %d replayed, want exactly 1 and %d",
					round, pauser, len(winners), winners, replayed, clients-1)
			}
			t.Logf("token %d, paused on %s: the handler ran once (%s); %d resumes got -32602 replayed", round, pauser, winners[0], replayed)
		}
	})
}

// TestMultiNodeRedisOutage stops Redis while flows are paused: resumes fail
// closed with -32603 naming the store, nothing of the cause, on both nodes while everything that does
// not need the single-use store keeps working, and once Redis is back on
// the same port, the same node processes resume the paused flows.
func TestMultiNodeRedisOutage(t *testing.T) {
	t.Parallel()
	redis := testredis.StartServer(t)
	keys := mnKeyRing(t, "k1")
	args := mnClusterArgs(redis.URL(), "--keys", keys)
	a := mnStartNode(t, "A", nil, args...)
	b := mnStartNode(t, "B", nil, args...)
	pidA, pidB := a.pid(), b.pid()
	ca := mnConnect(t, a.url(), &http.Client{Transport: mnTransport(t)})
	cb := mnConnect(t, b.url(), &http.Client{Transport: mnTransport(t)})
	nodes := map[string]*mnClient{"A": ca, "B": cb}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var tokens []string // every requestState issued, to check the logs
	pause := func(node, svc string) string {
		t.Helper()
		state, err := nodes[node].pauseDeploy(ctx, svc)
		if err != nil {
			t.Fatalf("round 1 of %s on %s: %v", svc, node, err)
		}
		tokens = append(tokens, state)
		return state
	}
	resumeOK := func(node, svc, state string) {
		t.Helper()
		text, err := nodes[node].resumeDeploy(ctx, svc, state)
		if err != nil {
			t.Fatalf("resume of %s on %s: %v", svc, node, err)
		}
		if text != mnDeployed(svc) {
			t.Fatalf("resume of %s on %s: text %q, want %q", svc, node, text, mnDeployed(svc))
		}
	}

	// Before the outage: the cluster works, and some flows stay paused.
	resumeOK("B", "warmup", pause("A", "warmup"))
	pausedOnA := pause("A", "before-a")
	pausedOnB := pause("B", "before-b")
	failedOnA := pause("B", "failed-a") // resumed on A during the outage
	failedOnB := pause("A", "failed-b") // resumed on B during the outage

	redis.Stop()

	// A resume must fail closed: the store cannot say whether the token was
	// used, so the handler does not run.
	for _, c := range []struct{ node, svc, state string }{{"A", "failed-a", failedOnA}, {"B", "failed-b", failedOnB}} {
		start := time.Now()
		_, err := nodes[c.node].resumeDeploy(ctx, c.svc, c.state)
		took := time.Since(start)
		je, reason, ok := mnRPCError(err)
		if !ok {
			t.Fatalf("resume on %s with Redis down: %v (%T), want JSON-RPC error -32603", c.node, err, err)
		}
		if je.Code != -32603 {
			t.Errorf("resume on %s with Redis down: code %d message %q data %s, want -32603", c.node, je.Code, je.Message, je.Data)
		}
		if reason != "" {
			t.Errorf("resume on %s with Redis down: data %s carries a reason; a store outage must not look like a rejected token", c.node, je.Data)
		}
		// The caller learns that the store is down and to try again, as
		// /readyz tells anyone (issue 30 item 11), and nothing of the cause.
		if je.Message != "the single-use store is unavailable; try again" {
			t.Errorf("resume on %s with Redis down: message %q, want the store named and a retry suggested", c.node, je.Message)
		}
		leak := strings.ToLower(je.Message + " " + string(je.Data))
		for _, word := range []string{"redis", "replay", "requeststate", "dial", "refused", "connect", "127.0.0.1", redis.Addr(), "reserve", "timeout", "deadline"} {
			if strings.Contains(leak, strings.ToLower(word)) {
				t.Errorf("resume on %s with Redis down: message %q data %s mentions %q, want nothing of the cause", c.node, je.Message, je.Data, word)
			}
		}
		t.Logf("resume on %s with Redis down: %d %q (after %v)", c.node, je.Code, je.Message, took.Round(time.Millisecond))
	}

	// Everything that does not consume a token still works on both nodes.
	var pausedInOutage []string
	for _, node := range []string{"A", "B"} {
		res, err := nodes[node].cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list on %s with Redis down: %v", node, err)
		}
		if !slices.ContainsFunc(res.Tools, func(tool *mcp.Tool) bool { return tool.Name == "deploy" }) {
			t.Errorf("tools/list on %s with Redis down: no deploy tool", node)
		}
		pausedInOutage = append(pausedInOutage, pause(node, "during-"+strings.ToLower(node)))
	}

	redis.Start() // the same port, an empty dataset

	// The same processes, no restart: go-redis dials the server again.
	if a.pid() != pidA || b.pid() != pidB {
		t.Fatalf("a node was restarted")
	}
	resumeOK("B", "before-a", pausedOnA)
	resumeOK("A", "before-b", pausedOnB)
	// Failing closed did not burn the tokens: nothing was reserved.
	resumeOK("A", "failed-a", failedOnA)
	resumeOK("B", "failed-b", failedOnB)
	resumeOK("B", "during-a", pausedInOutage[0])
	resumeOK("A", "during-b", pausedInOutage[1])
	// And single use holds again, across nodes.
	_, err := ca.resumeDeploy(ctx, "before-a", pausedOnA)
	mnWantReject(t, "replay on A after Redis came back", err, "replayed")
	_, err = cb.resumeDeploy(ctx, "during-b", pausedInOutage[1])
	mnWantReject(t, "replay on B after Redis came back", err, "replayed")

	for _, n := range []*mnNode{a, b} {
		logs := n.logs()
		for _, tok := range tokens {
			if strings.Contains(logs, tok) {
				t.Errorf("node %s logged a requestState", n.name)
			}
		}
		// The client hears nothing specific; the operator must.
		if !strings.Contains(logs, `"level":"ERROR"`) {
			t.Errorf("node %s logged no error for the resume it refused with Redis down:\n%s", n.name, tail(logs, 20))
		}
	}
}

// TestMultiNodeKeyRotation rolls a new key out to both nodes, one node at a
// time, while clients keep pausing flows on one node and resuming them on
// the other: the new key is added second, then promoted, then the old one
// removed, each step restarting node A and then node B. No flow may fail;
// a token sealed under the old key still outstanding at the end opens
// until a node drops the old key, and is then rejected as invalid.
func TestMultiNodeKeyRotation(t *testing.T) {
	t.Parallel()
	redisURL := testredis.Start(t)
	master := mnKeyRing(t, "old") // the ring being rolled out, edited with `mrtr keys`
	fileA := master + ".node-a"   // node A reads --keys fileA; node B gets $MRTR_KEYS
	// Anonymous tokens live 60 s by default; the roll-out may take longer
	// on a slow machine, and the old tokens below must outlive it.
	args := mnClusterArgs(redisURL, "--anonymous-ttl", "10m")

	// configure returns the environment and arguments that start node i
	// with the ring as master holds it now, and the ring's key ids.
	configure := func(i int) (env, nodeArgs []string, ids []string) {
		t.Helper()
		data, err := os.ReadFile(master)
		if err != nil {
			t.Fatal(err)
		}
		ids = mnRingIDs(t, master)
		if i == 0 {
			if err := os.WriteFile(fileA, data, 0o600); err != nil {
				t.Fatal(err)
			}
			return nil, append(slices.Clone(args), "--keys", fileA), ids
		}
		return []string{"MRTR_KEYS=" + string(data)}, args, ids
	}
	var nodes [2]*mnNode
	r := newMNRouter()
	for i, name := range []string{"A", "B"} {
		env, nodeArgs, ids := configure(i)
		nodes[i] = mnStartNode(t, name, env, nodeArgs...)
		mnWantPolicyKeys(t, nodes[i], ids)
		r.undrain(i, ids[0])
	}

	// Clients: a few workers that pause on one node and resume on the
	// other without pause, and a controller that holds old tokens back.
	const workers = 4
	var transports []*http.Transport
	connectPair := func() [2]*mnClient {
		tr := mnTransport(t)
		transports = append(transports, tr)
		hc := &http.Client{Transport: tr}
		return [2]*mnClient{mnConnect(t, nodes[0].url(), hc), mnConnect(t, nodes[1].url(), hc)}
	}
	ctrl := connectPair()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Tokens sealed under "old" before the roll-out, resumed at the end.
	held := make([]string, 3)
	for i := range held {
		state, err := ctrl[i%2].pauseDeploy(ctx, fmt.Sprintf("held-%d", i))
		if err != nil {
			t.Fatalf("round 1 of held-%d: %v", i, err)
		}
		if kid := mnKid(state); kid != "old" {
			t.Fatalf("held-%d sealed under key %q, want old", i, kid)
		}
		held[i] = state
	}

	var (
		phase    atomic.Int32
		stats    mnRotationStats
		stopping = make(chan struct{})
		wg       sync.WaitGroup
	)
	phases := []string{"[old] on both", "A [old new]", "B [old new]", "A [new old]", "B [new old]", "A [new]", "B [new]"}
	stats.init(len(phases))
	for w := range workers {
		pair := connectPair()
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stopping:
					return
				default:
				}
				svc := fmt.Sprintf("svc-%d-%d", w, k)
				p, want := r.acquire((w + k) % 2)
				state, err := pair[p].pauseDeploy(ctx, svc)
				r.release(p)
				if err != nil {
					stats.fail(int(phase.Load()), fmt.Sprintf("%s: round 1 on %s: %v", svc, "AB"[p:p+1], err))
					continue
				}
				kid := mnKid(state)
				if kid != want {
					stats.fail(int(phase.Load()), fmt.Sprintf("%s: node %s sealed under %q, want its primary %q", svc, "AB"[p:p+1], kid, want))
				}
				q, _ := r.acquire(1 - p)
				text, err := pair[q].resumeDeploy(ctx, svc, state)
				r.release(q)
				switch {
				case err != nil:
					stats.fail(int(phase.Load()), fmt.Sprintf("%s: paused on %s under %s, resumed on %s: %v", svc, "AB"[p:p+1], kid, "AB"[q:q+1], err))
				case text != mnDeployed(svc):
					stats.fail(int(phase.Load()), fmt.Sprintf("%s: resumed on %s: text %q", svc, "AB"[q:q+1], text))
				default:
					stats.ok(int(phase.Load()), p, q, kid)
				}
			}
		})
	}
	stopWorkers := sync.OnceFunc(func() { close(stopping); wg.Wait() })
	defer stopWorkers()

	// progress waits until every node both sealed and opened a few more
	// flows, so that each phase is really exercised.
	progress := func() {
		t.Helper()
		before := stats.snapshot()
		deadline := time.Now().Add(time.Minute)
		for {
			now := stats.snapshot()
			if now.flows >= before.flows+2*workers &&
				now.pausedOn[0] >= before.pausedOn[0]+2 && now.pausedOn[1] >= before.pausedOn[1]+2 &&
				now.resumedOn[0] >= before.resumedOn[0]+2 && now.resumedOn[1] >= before.resumedOn[1]+2 {
				return
			}
			if now.failures > 0 {
				t.Fatalf("flows failed in phase %q: %v", phases[phase.Load()], stats.failed())
			}
			if time.Now().After(deadline) {
				t.Fatalf("phase %q: no progress within a minute (%d flows before, %d now)", phases[phase.Load()], before.flows, now.flows)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// roll restarts node i with the ring as master holds it now: flows go
	// to the other node until it is back.
	roll := func(i int) {
		t.Helper()
		r.drain(i)
		for _, tr := range transports {
			tr.CloseIdleConnections()
		}
		env, nodeArgs, ids := configure(i)
		phase.Add(1)
		nodes[i].restart(env, nodeArgs...)
		mnWantPolicyKeys(t, nodes[i], ids)
		r.undrain(i, ids[0])
		progress()
	}
	resume := func(node int, i int) error {
		t.Helper()
		text, err := ctrl[node].resumeDeploy(ctx, fmt.Sprintf("held-%d", i), held[i])
		if err == nil && text != mnDeployed(fmt.Sprintf("held-%d", i)) {
			t.Fatalf("held-%d on %s: text %q", i, "AB"[node:node+1], text)
		}
		return err
	}

	progress()

	// Step 1: add the new key second. Every node can open it before any
	// node seals with it.
	mnMrtr(t, "keys", "add", master, "--id", "new")
	roll(0)
	roll(1)

	// Step 2: promote it. Node A seals under "new" while B (still [old
	// new]) opens those tokens, and the other way round.
	mnMrtr(t, "keys", "promote", master, "new")
	roll(0)
	roll(1)
	if err := resume(0, 0); err != nil {
		t.Fatalf("held-0 (sealed under old) on A [new old]: %v", err)
	}

	// Step 3: remove the old key.
	mnMrtr(t, "keys", "remove", master, "old")
	if ids := mnRingIDs(t, master); !slices.Equal(ids, []string{"new"}) {
		t.Fatalf("ring after remove: %v, want [new]", ids)
	}
	roll(0)
	mnWantReject(t, "held-2 (sealed under old) on A [new]", resume(0, 2), "invalid")
	if err := resume(1, 1); err != nil {
		t.Fatalf("held-1 (sealed under old) on B, which still has [new old]: %v", err)
	}
	roll(1)
	mnWantReject(t, "held-2 (sealed under old) on B [new]", resume(1, 2), "invalid")

	stopWorkers()
	s := stats.snapshot()
	if s.failures > 0 {
		t.Fatalf("%d flows failed during the roll-out: %v", s.failures, stats.failed())
	}
	for i, name := range phases {
		if stats.byPhase[i].Load() == 0 {
			t.Errorf("no flow completed in phase %q", name)
		}
	}
	if s.byKid["old"] == 0 || s.byKid["new"] == 0 {
		t.Errorf("flows by sealing key %v, want some under old and some under new", s.byKid)
	}
	if s.cross == 0 {
		t.Errorf("no flow was paused on one node and resumed on the other")
	}
	var perPhase []string
	for i, name := range phases {
		perPhase = append(perPhase, fmt.Sprintf("%s: %d", name, stats.byPhase[i].Load()))
	}
	t.Logf("%d flows, 0 failed; %d crossed nodes; by sealing key %v; per phase: %s", s.flows, s.cross, s.byKid, strings.Join(perPhase, ", "))
}

// mnWantPolicyKeys checks the key ids the node logged in its "mrtr policy"
// line.
func mnWantPolicyKeys(t *testing.T, n *mnNode, want []string) {
	t.Helper()
	for line := range strings.SplitSeq(n.logs(), "\n") {
		var rec struct {
			Msg  string   `json:"msg"`
			Keys []string `json:"keys"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "mrtr policy" {
			if !slices.Equal(rec.Keys, want) {
				t.Fatalf("node %s runs with keys %v, want %v", n.name, rec.Keys, want)
			}
			return
		}
	}
	t.Fatalf("node %s logged no \"mrtr policy\" line:\n%s", n.name, tail(n.logs(), 20))
}

// mnRouter routes each request to a node that is up, the way a load
// balancer with connection draining would: drain takes a node out of
// rotation and waits for its requests in flight to finish.
type mnRouter struct {
	mu       sync.Mutex
	cond     *sync.Cond
	up       [2]bool
	inflight [2]int
	primary  [2]string // the key id node i seals with
}

func newMNRouter() *mnRouter {
	r := &mnRouter{}
	r.cond = sync.NewCond(&r.mu)
	return r
}

// acquire returns prefer if it is up, else the other node, waiting while
// neither is, and the key id the chosen node seals with. The caller must
// call release when its request is done.
func (r *mnRouter) acquire(prefer int) (node int, primary string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		for _, n := range []int{prefer, 1 - prefer} {
			if r.up[n] {
				r.inflight[n]++
				return n, r.primary[n]
			}
		}
		r.cond.Wait()
	}
}

func (r *mnRouter) release(node int) {
	r.mu.Lock()
	r.inflight[node]--
	r.mu.Unlock()
	r.cond.Broadcast()
}

// drain takes node out of rotation and waits until no request to it is in
// flight.
func (r *mnRouter) drain(node int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.up[node] = false
	for r.inflight[node] > 0 {
		r.cond.Wait()
	}
}

// undrain puts node back into rotation, sealing under primary.
func (r *mnRouter) undrain(node int, primary string) {
	r.mu.Lock()
	r.up[node], r.primary[node] = true, primary
	r.mu.Unlock()
	r.cond.Broadcast()
}

// mnRotationStats counts the flows of the key rotation test.
type mnRotationStats struct {
	byPhase []atomic.Int64

	mu        sync.Mutex
	flows     int
	cross     int
	pausedOn  [2]int
	resumedOn [2]int
	byKid     map[string]int
	failures  []string
}

type mnRotationSnapshot struct {
	flows, cross, failures int
	pausedOn, resumedOn    [2]int
	byKid                  map[string]int
}

func (s *mnRotationStats) init(phases int) {
	s.byPhase = make([]atomic.Int64, phases)
	s.byKid = map[string]int{}
}

func (s *mnRotationStats) ok(phase, paused, resumed int, kid string) {
	s.byPhase[phase].Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flows++
	if paused != resumed {
		s.cross++
	}
	s.pausedOn[paused]++
	s.resumedOn[resumed]++
	s.byKid[kid]++
}

func (s *mnRotationStats) fail(phase int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, fmt.Sprintf("phase %d: %s", phase, msg))
}

func (s *mnRotationStats) failed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.failures)
}

func (s *mnRotationStats) snapshot() mnRotationSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	kids := make(map[string]int, len(s.byKid))
	for k, v := range s.byKid {
		kids[k] = v
	}
	return mnRotationSnapshot{flows: s.flows, cross: s.cross, failures: len(s.failures),
		pausedOn: s.pausedOn, resumedOn: s.resumedOn, byKid: kids}
}
