package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/mrtr-go/mrtr/internal/testing/testredis"
)

// Flags of TestLoad, the load test of docs/BENCHMARKS.md ("Load: many nodes
// on one Redis"). A normal test run keeps the short default; the numbers in
// the document come from
//
//	go test ./e2e -run TestLoad -count=1 -v -load.duration 20s
var (
	loadDuration = flag.Duration("load.duration", 3*time.Second, "how long each phase of TestLoad starts new flows")
	loadClients  = flag.Int("load.clients", 64, "concurrent clients in each phase of TestLoad")
)

// loadMax is guess_number's max in the load test. A binary search over
// [1, 3] guesses 2 first, so a flow takes 2 rounds (secret 2) or 3 rounds
// (secret 1 or 3, after a higher/lower hint): 8/3 rounds on average.
const loadMax = 3

// TestLoad runs many concurrent guess_number flows, first across two nodes
// that share one Redis (every round of a flow goes to the other node than
// the round before), then against one node with the in-memory store, and
// reports throughput and latency of both. Every flow must end with the
// right number.
func TestLoad(t *testing.T) {
	t.Parallel()
	if *loadDuration <= 0 || *loadClients <= 0 {
		t.Fatalf("-load.duration %v and -load.clients %d must be positive", *loadDuration, *loadClients)
	}
	redisURL := testredis.Start(t)
	keys := mnKeyRing(t, "k1")
	// The race detector slows the nodes several times over while 64
	// clients and the other e2e tests keep both cores busy: a store call
	// can then wait for a core longer than the default 500ms
	// --replay-timeout, and the resume fails closed (-32603, the store unavailable).
	// That happened to 1 flow of 495 in one CI run (p99 round 668ms; the
	// cause was not logged then, failures now print the nodes' warnings).
	// The test is about flows never ending wrong, so under -race the
	// nodes get more time.
	cluster := []string{"--keys", keys}
	if raceEnabled() {
		cluster = append(cluster, "--replay-timeout", "5s")
	}
	a := mnStartNode(t, "A", nil, mnClusterArgs(redisURL, cluster...)...)
	b := mnStartNode(t, "B", nil, mnClusterArgs(redisURL, cluster...)...)
	m := mnStartNode(t, "M", nil, "--keys", keys, "--server-id", mnServerID, "--replay", "memory")
	redisPID := loadRedisPID(t, redisURL)

	results := []loadResult{
		loadRun(t, "2 nodes, Redis store", []*mnNode{a, b}, redisPID),
		loadRun(t, "1 node, in-memory store", []*mnNode{m}, 0),
	}
	race := ""
	if raceEnabled() {
		race = ", -race (numbers not comparable)"
	}
	t.Logf("%d clients, %v per phase, guess_number max %d, GOMAXPROCS %d%s", *loadClients, *loadDuration, loadMax, runtime.GOMAXPROCS(0), race)
	t.Logf("| setup | flows | rounds | flows/s | rounds/s | p50 round | p99 round | p50 round 1 | p99 round 1 | p50 resume | p99 resume |")
	t.Logf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range results {
		t.Logf("%s", r.row())
	}
	if results[0].cpuErr != nil {
		t.Logf("no CPU times: %v", results[0].cpuErr)
		return
	}
	t.Logf("CPU time used during each phase (user + system; the client is this test process):")
	t.Logf("| setup | client | mrtr nodes | Redis | nodes per round | Redis per round |")
	t.Logf("| --- | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range results {
		t.Logf("%s", r.cpuRow())
	}
}

// loadRedisPID asks the Redis server at url for its process id.
func loadRedisPID(t *testing.T, url string) int {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	info, err := c.Info(t.Context(), "server").Result()
	if err != nil {
		t.Fatalf("redis INFO server: %v", err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("redis INFO server: process_id %q", v)
			}
			return pid
		}
	}
	t.Fatalf("redis INFO server has no process_id")
	return 0
}

// loadResult is what one phase of TestLoad measured.
type loadResult struct {
	name    string
	flows   int
	rounds  int
	elapsed time.Duration
	first   []time.Duration // latency of round 1 (pauses: no store involved)
	resumes []time.Duration // latency of rounds 2 and 3 (open, reserve, commit)

	// CPU time used while the phase ran, by this process (the clients), by
	// the nodes together, and by Redis; cpuErr if it could not be read.
	cpuClient, cpuNodes, cpuRedis time.Duration
	cpuErr                        error
}

func (r loadResult) cpuRow() string {
	perRound := func(d time.Duration) string {
		return fmt.Sprintf("%.0f µs", float64(d.Microseconds())/float64(r.rounds))
	}
	return fmt.Sprintf("| %s | %.2f s | %.2f s | %.2f s | %s | %s |", r.name,
		r.cpuClient.Seconds(), r.cpuNodes.Seconds(), r.cpuRedis.Seconds(), perRound(r.cpuNodes), perRound(r.cpuRedis))
}

// loadCPUs returns the CPU time used so far by this process, by the nodes
// together and by the process redisPID (none if 0).
func loadCPUs(nodes []*mnNode, redisPID int) (client, servers, redis time.Duration, err error) {
	if client, err = loadCPU(os.Getpid()); err != nil {
		return
	}
	for _, n := range nodes {
		var d time.Duration
		if d, err = loadCPU(n.pid()); err != nil {
			return
		}
		servers += d
	}
	if redisPID != 0 {
		redis, err = loadCPU(redisPID)
	}
	return
}

func (r loadResult) row() string {
	all := slices.Concat(r.first, r.resumes)
	slices.Sort(all)
	slices.Sort(r.first)
	slices.Sort(r.resumes)
	secs := r.elapsed.Seconds()
	return fmt.Sprintf("| %s | %d | %d | %.0f | %.0f | %s | %s | %s | %s | %s | %s |",
		r.name, r.flows, r.rounds, float64(r.flows)/secs, float64(r.rounds)/secs,
		mnMillis(mnPercentile(all, 50)), mnMillis(mnPercentile(all, 99)),
		mnMillis(mnPercentile(r.first, 50)), mnMillis(mnPercentile(r.first, 99)),
		mnMillis(mnPercentile(r.resumes, 50)), mnMillis(mnPercentile(r.resumes, 99)))
}

// loadWorker is one client: its own HTTP transport (connections reused
// across rounds and flows) and one go-sdk session per node.
type loadWorker struct {
	sessions []*mnClient
	next     int // index of the node that gets the next round

	flows, rounds   int
	first, resumes  []time.Duration
	lastState       string // requestState of the last round of the last flow
	lastStateNode   int    // the node that accepted it
	failures        []string
	failuresDropped int
}

// loadProblems returns up to max lines of a node's log that show a
// problem: records at level WARN or above, JSON (the nodes run with
// --log-format json) or text, and any line that is no log record at all
// (a panic, a race report, a message of the standard log package), which
// a healthy node does not write.
func loadProblems(log string, max int) string {
	var lines []string
	for line := range strings.Lines(log) {
		line = strings.TrimRight(line, "\r\n")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if level, ok := logLevel(line); ok && level < slog.LevelWarn {
			continue
		}
		if lines = append(lines, line); len(lines) == max {
			break
		}
	}
	if len(lines) == 0 {
		return "(no warnings or errors)"
	}
	return strings.Join(lines, "\n")
}

// textLevel is the level field of a slog text record.
var textLevel = regexp.MustCompile(`(?:^| )level=(\S+)`)

// logLevel returns the level of a slog record, JSON or text, and false
// for a line that is no record.
func logLevel(line string) (slog.Level, bool) {
	var level slog.Level
	var rec struct {
		Level *string `json:"level"`
	}
	if err := json.Unmarshal([]byte(line), &rec); err == nil {
		if rec.Level == nil {
			return 0, false
		}
		return level, level.UnmarshalText([]byte(*rec.Level)) == nil
	}
	if m := textLevel.FindStringSubmatch(line); m != nil {
		return level, level.UnmarshalText([]byte(m[1])) == nil
	}
	return 0, false
}

// loadRun runs *loadClients workers against nodes until *loadDuration has
// passed; a flow under way then finishes. It fails t if any flow failed or
// ended with a wrong number.
func loadRun(t *testing.T, name string, nodes []*mnNode, redisPID int) loadResult {
	t.Helper()
	workers := make([]*loadWorker, *loadClients)
	for i := range workers {
		hc := &http.Client{Transport: mnTransport(t)}
		w := &loadWorker{next: i % len(nodes)}
		for _, n := range nodes {
			w.sessions = append(w.sessions, mnConnect(t, n.url(), hc))
		}
		workers[i] = w
	}
	var (
		started atomic.Int64
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	client0, nodes0, redis0, cpuErr := loadCPUs(nodes, redisPID)
	begin := time.Now()
	for _, w := range workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				started.Add(1)
				w.flow()
			}
		})
	}
	time.Sleep(*loadDuration)
	close(stop)
	wg.Wait()
	res := loadResult{name: name, elapsed: time.Since(begin), cpuErr: cpuErr}
	if cpuErr == nil {
		client1, nodes1, redis1, err := loadCPUs(nodes, redisPID)
		res.cpuClient, res.cpuNodes, res.cpuRedis, res.cpuErr = client1-client0, nodes1-nodes0, redis1-redis0, err
	}

	var failures []string
	failed := 0
	for _, w := range workers {
		res.flows += w.flows
		res.rounds += w.rounds
		res.first = append(res.first, w.first...)
		res.resumes = append(res.resumes, w.resumes...)
		failed += len(w.failures) + w.failuresDropped
		failures = append(failures, w.failures...)
	}
	if failed > 0 {
		t.Errorf("%s: %d of %d flows failed or ended wrong; first ones:\n%s", name, failed, started.Load(), strings.Join(failures[:min(len(failures), 10)], "\n"))
		for _, n := range nodes {
			t.Logf("node %s logged:\n%s", n.name, loadProblems(n.logs(), 10))
		}
	}
	if int64(res.flows+failed) != started.Load() {
		t.Errorf("%s: %d flows started, %d ended right and %d wrong: some were lost", name, started.Load(), res.flows, failed)
	}
	if res.flows == 0 {
		t.Fatalf("%s: no flow completed in %v", name, *loadDuration)
	}
	// The store really is single use: a spent token is refused, on every
	// node.
	w := workers[slices.IndexFunc(workers, func(w *loadWorker) bool { return w.lastState != "" })]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, s := range w.sessions {
		_, err := s.cs.CallTool(ctx, loadParams(w.lastState, 1))
		mnWantReject(t, fmt.Sprintf("%s: replay on node %s of a token spent on node %s", name, nodes[i].name, nodes[w.lastStateNode].name), err, "replayed")
	}
	t.Logf("%s: %d flows, %d rounds (%.2f per flow) in %v", name, res.flows, res.rounds, float64(res.rounds)/float64(res.flows), res.elapsed.Round(time.Millisecond))
	return res
}

// loadParams are the parameters of one guess_number round: the first round
// carries no state; every later one the guess and the echoed state.
func loadParams(state string, guess int) *mcp.CallToolParams {
	p := &mcp.CallToolParams{Name: "guess_number", Arguments: map[string]any{"max": loadMax}}
	if state != "" {
		p.RequestState = state
		p.InputResponses = mcp.InputResponseMap{
			"guess": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"guess": guess}},
		}
	}
	return p
}

// flow plays one game of guess_number by binary search, each round on the
// next node, and records it as done or failed.
func (w *loadWorker) flow() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		lo, hi  = 1, loadMax
		state   string
		guess   int
		first   time.Duration
		resumes []time.Duration
	)
	fail := func(format string, args ...any) {
		if len(w.failures) < 10 {
			w.failures = append(w.failures, fmt.Sprintf(format, args...))
		} else {
			w.failuresDropped++
		}
	}
	for round := 1; ; round++ {
		// Binary search over [1, 3] needs at most 2 guesses: 3 rounds.
		if round > 3 {
			fail("no correct answer after %d rounds (secret in [%d, %d])", round-1, lo, hi)
			return
		}
		if round > 1 {
			guess = (lo + hi) / 2
		}
		node := w.next
		w.next = (w.next + 1) % len(w.sessions)
		start := time.Now()
		res, err := w.sessions[node].cs.CallTool(ctx, loadParams(state, guess))
		took := time.Since(start)
		if err != nil {
			fail("round %d on node %d: %v", round, node, err)
			return
		}
		if round == 1 {
			first = took
		} else {
			resumes = append(resumes, took)
		}
		if !res.NeedsInput() {
			text := goSDKText(res)
			if round == 1 || res.IsError || text != fmt.Sprintf("correct: %d", guess) {
				fail("round %d on node %d: isError %v, text %q after guess %d (secret in [%d, %d])", round, node, res.IsError, text, guess, lo, hi)
				return
			}
			w.flows++
			w.rounds += round
			w.first = append(w.first, first)
			w.resumes = append(w.resumes, resumes...)
			w.lastState, w.lastStateNode = state, node
			return
		}
		ask, ok := res.InputRequests["guess"].(*mcp.ElicitParams)
		if !ok || res.RequestState == "" {
			fail("round %d on node %d: input_required without a guess elicitation or requestState", round, node)
			return
		}
		state = res.RequestState
		if round == 1 {
			continue
		}
		msg := strings.ToLower(ask.Message)
		switch higher, lower := strings.Contains(msg, "higher"), strings.Contains(msg, "lower"); {
		case higher && !lower:
			lo = guess + 1
		case lower && !higher:
			hi = guess - 1
		default:
			fail("round %d on node %d: guess %d got no higher/lower hint: %q", round, node, guess, ask.Message)
			return
		}
		if lo > hi {
			fail("round %d on node %d: inconsistent hints, the secret would be in [%d, %d]", round, node, lo, hi)
			return
		}
	}
}

// TestLoadProblems pins what a failed load run prints of a node's log:
// JSON records (what the nodes write) and text records at WARN or above,
// and lines that are no record, in order and up to max.
func TestLoadProblems(t *testing.T) {
	log := `{"time":"2026-11-30T19:40:12.24Z","level":"INFO","msg":"mrtr serving","url":"http://127.0.0.1:1/mcp"}
{"time":"2026-11-30T19:40:13.01Z","level":"DEBUG","msg":"resume","round":2}
{"time":"2026-11-30T19:40:13.02Z","level":"WARN","msg":"replay store unavailable","err":"i/o timeout"}
time=2026-11-30T19:40:13.03Z level=INFO msg="mrtr policy"

{"time":"2026-11-30T19:40:13.04Z","level":"ERROR","msg":"commit","err":"context canceled"}
time=2026-11-30T19:40:13.05Z level=WARN msg="slow store"
{"time":"2026-11-30T19:40:13.06Z","level":"INFO+2","msg":"still info"}
{"time":"2026-11-30T19:40:13.07Z","level":"ERROR+4","msg":"worse"}
{"time":"2026-11-30T19:40:13.08Z","msg":"a JSON line with no level"}
panic: runtime error: invalid memory address or nil pointer dereference
{"time":"2026-11-30T19:40:13.09Z","level":"ERROR","msg":"one too many"}
`
	want := `{"time":"2026-11-30T19:40:13.02Z","level":"WARN","msg":"replay store unavailable","err":"i/o timeout"}
{"time":"2026-11-30T19:40:13.04Z","level":"ERROR","msg":"commit","err":"context canceled"}
time=2026-11-30T19:40:13.05Z level=WARN msg="slow store"
{"time":"2026-11-30T19:40:13.07Z","level":"ERROR+4","msg":"worse"}
{"time":"2026-11-30T19:40:13.08Z","msg":"a JSON line with no level"}
panic: runtime error: invalid memory address or nil pointer dereference`
	if got := loadProblems(log, 6); got != want {
		t.Errorf("loadProblems:\n%s\nwant:\n%s", got, want)
	}
	if got, want := loadProblems(log, 1), `{"time":"2026-11-30T19:40:13.02Z","level":"WARN","msg":"replay store unavailable","err":"i/o timeout"}`; got != want {
		t.Errorf("loadProblems, max 1:\n%s\nwant:\n%s", got, want)
	}
	quiet := `{"time":"2026-11-30T19:40:12.24Z","level":"INFO","msg":"mrtr serving"}
time=2026-11-30T19:40:13.03Z level=DEBUG msg=x

`
	if got := loadProblems(quiet, 10); got != "(no warnings or errors)" {
		t.Errorf("loadProblems of a quiet log: %q", got)
	}
}
