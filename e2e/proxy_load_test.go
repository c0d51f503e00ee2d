package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/testing/testredis"
)

// proxyFlowRound posts one round of the everything-server's 3-round
// test_input_required_result_multi_round tool and returns the result.
func proxyFlowRound(c *http.Client, url string, id int, state string, responses map[string]any) (map[string]any, error) {
	return postTool(c, url, id, "test_input_required_result_multi_round", state, responses)
}

// postTool posts one round of a call of tool (a first round when state is
// empty, else a retry with state and responses) as a 2026-07-28 client
// that can elicit, and returns the result.
func postTool(c *http.Client, url string, id int, tool, state string, responses map[string]any) (map[string]any, error) {
	params := map[string]any{"name": tool, "arguments": map[string]any{}}
	if state != "" {
		params["requestState"] = state
		params["inputResponses"] = responses
	}
	return postMCP(c, url, id, "tools/call", tool, params)
}

// postMCP posts one 2026-07-28 request (no session, the envelope in
// _meta, the Mcp-Method and Mcp-Name headers; name may be empty) and
// returns its result, from a JSON body or the response of an event
// stream.
func postMCP(c *http.Client, url string, id int, method, name string, params map[string]any) (map[string]any, error) {
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(b), "\n") {
			if d, ok := strings.CutPrefix(line, "data:"); ok && strings.Contains(d, `"id"`) {
				b = []byte(strings.TrimSpace(d))
			}
		}
	}
	var out struct {
		Result map[string]any `json:"result"`
		Error  any            `json:"error"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("reply %q: %w", b, err)
	}
	if out.Error != nil {
		return nil, fmt.Errorf("JSON-RPC error %v", out.Error)
	}
	return out.Result, nil
}

// proxyFlow3 runs one 3-round flow, round r through urls[r % len(urls)],
// and checks its result. It returns the latency of each round.
func proxyFlow3(c *http.Client, urls []string, id int) ([]time.Duration, error) {
	answers := []map[string]any{
		nil,
		{"step1": map[string]any{"action": "accept", "content": map[string]any{"name": "Alice"}}},
		{"step2": map[string]any{"action": "accept", "content": map[string]any{"color": "blue"}}},
	}
	state := ""
	var lat []time.Duration
	for r := range 3 {
		start := time.Now()
		res, err := proxyFlowRound(c, urls[r%len(urls)], id*10+r, state, answers[r])
		lat = append(lat, time.Since(start))
		if err != nil {
			return lat, fmt.Errorf("round %d: %w", r+1, err)
		}
		if r < 2 {
			st, _ := res["requestState"].(string)
			if res["resultType"] != "input_required" || st == "" || st == state {
				return lat, fmt.Errorf("round %d: want input_required with a fresh requestState, got %v", r+1, res)
			}
			state = st
			continue
		}
		b, _ := json.Marshal(res["content"])
		if res["resultType"] != "complete" || !strings.Contains(string(b), "Alice") || !strings.Contains(string(b), "blue") {
			return lat, fmt.Errorf("round 3: wrong result %v", res)
		}
	}
	return lat, nil
}

type proxyLoadResult struct {
	name               string
	flows, failed      int
	elapsed            time.Duration
	p50, p99           time.Duration
	firstErr           error
	proxiedStatesPlain int
}

func (r proxyLoadResult) row() string {
	return fmt.Sprintf("| %s | %d | %d | %.0f | %v | %v |", r.name, r.flows, r.failed,
		float64(r.flows)/r.elapsed.Seconds(), r.p50.Round(time.Microsecond*100), r.p99.Round(time.Microsecond*100))
}

// proxyLoad runs *loadClients clients starting flows for *loadDuration.
func proxyLoad(name string, urls []string) proxyLoadResult {
	var (
		mu     sync.Mutex
		lats   []time.Duration
		flows  atomic.Int64
		failed atomic.Int64
		first  error
		wg     sync.WaitGroup
	)
	tr := &http.Transport{MaxIdleConnsPerHost: *loadClients}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: time.Minute}
	start := time.Now()
	deadline := start.Add(*loadDuration)
	for w := range *loadClients {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				lat, err := proxyFlow3(c, urls, w*100000+i)
				mu.Lock()
				lats = append(lats, lat...)
				if err != nil && first == nil {
					first = err
				}
				mu.Unlock()
				if err != nil {
					failed.Add(1)
				} else {
					flows.Add(1)
				}
			}
		})
	}
	wg.Wait()
	r := proxyLoadResult{name: name, flows: int(flows.Load()), failed: int(failed.Load()), elapsed: time.Since(start), firstErr: first}
	slices.Sort(lats)
	if len(lats) > 0 {
		r.p50, r.p99 = lats[len(lats)/2], lats[len(lats)*99/100]
	}
	return r
}

// TestProxyLoad runs *loadClients concurrent 3-round flows of the
// everything-server for *loadDuration through two `mrtr proxy` processes on
// one Redis (every round through the other proxy than the round before),
// then the same load straight to the upstream, and reports both. Every
// flow must complete with the right result: none lost, none wrong.
func TestProxyLoad(t *testing.T) {
	t.Parallel()
	if *loadDuration <= 0 || *loadClients <= 0 {
		t.Fatalf("-load.duration %v and -load.clients %d must be positive", *loadDuration, *loadClients)
	}
	redisURL := testredis.Start(t)
	keys := mnKeyRing(t, "k1")
	up := startEverything(t, true)
	cluster := []string{"--keys", keys, "--server-id", "proxy-cluster", "--replay", redisURL}
	if raceEnabled() {
		cluster = append(cluster, "--replay-timeout", "5s") // see TestLoad
	}
	a := startProxied(t, up, cluster...)
	b := startProxied(t, up, cluster...)
	results := []proxyLoadResult{
		proxyLoad("2 proxies, one Redis", []string{a, b}),
		proxyLoad("straight to the upstream", []string{up}),
	}
	race := ""
	if raceEnabled() {
		race = ", -race (numbers not comparable)"
	}
	t.Logf("%d clients, %v, 3-round flows of the everything-server v1.8.0%s", *loadClients, *loadDuration, race)
	t.Logf("| setup | flows | failed | flows/s | p50 round | p99 round |")
	t.Logf("| --- | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range results {
		t.Logf("%s", r.row())
	}
	for _, r := range results {
		if r.failed > 0 || r.flows == 0 {
			t.Errorf("%s: %d flows failed of %d (first: %v)", r.name, r.failed, r.flows+r.failed, r.firstErr)
		}
	}
}
