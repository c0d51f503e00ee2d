package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"testing"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// leanUpstream is the smallest 2026-07-28 server that pauses once: a
// tools/call without requestState gets input_required with a plain state,
// one with a state gets a complete result. It does as little as it can,
// so that what the proxies cost is what the benchmark shows.
func leanUpstream() http.Handler {
	// Each reply carries the request's own id, as a JSON-RPC server's
	// must: the sealing proxy sends ids of its own upstream and refuses a
	// reply under any other.
	const pauseResult = `"result":{"resultType":"input_required","inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"Deploy web to production?","requestedSchema":{"type":"object","properties":{"approve":{"type":"boolean"}},"required":["approve"]}}}},"requestState":"{\"service\":\"web\",\"env\":\"production\",\"step\":1}"}}`
	const doneResult = `"result":{"resultType":"complete","content":[{"type":"text","text":"deployed web to production"}]}}`
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct{ ID json.RawMessage }
		if json.Unmarshal(body, &req) != nil || len(req.ID) == 0 {
			http.Error(w, "not a JSON-RPC request", http.StatusBadRequest)
			return
		}
		out := pauseResult
		if bytes.Contains(body, []byte(`"requestState"`)) {
			out = doneResult
		}
		out = `{"jsonrpc":"2.0","id":` + string(req.ID) + `,` + out
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(out)))
		io.WriteString(w, out)
	})
}

func flowBody(id int, state string) []byte {
	params := map[string]any{"name": "deploy", "arguments": map[string]any{"service": "web", "env": "production"},
		"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "bench", "version": "1"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
		}}
	if state != "" {
		params["requestState"] = state
		params["inputResponses"] = map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
	return b
}

type flowReply struct {
	Result struct {
		ResultType   string `json:"resultType"`
		RequestState string `json:"requestState"`
	} `json:"result"`
	Error *struct{ Message string } `json:"error"`
}

// proxyFlow runs one 2-round flow against url: the call, then the retry
// with the state it got and the answer.
func proxyFlow(c *http.Client, url string) error {
	post := func(body []byte) (flowReply, error) {
		var r flowReply
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "deploy")
		resp, err := c.Do(req)
		if err != nil {
			return r, err
		}
		defer resp.Body.Close()
		return r, json.NewDecoder(resp.Body).Decode(&r)
	}
	r1, err := post(flowBody(1, ""))
	if err != nil {
		return err
	}
	if r1.Result.ResultType != "input_required" || r1.Result.RequestState == "" {
		return fmt.Errorf("round 1: %+v (error %v)", r1.Result, r1.Error)
	}
	r2, err := post(flowBody(2, r1.Result.RequestState))
	if err != nil {
		return err
	}
	if r2.Result.ResultType != "complete" {
		return fmt.Errorf("round 2: %+v (error %v)", r2.Result, r2.Error)
	}
	return nil
}

// proxyContenders are the ways to reach the lean upstream: directly,
// through net/http/httputil.ReverseProxy (the floor of any Go gateway),
// and through mrtr's sealing proxy with the memory single-use store and
// its default transport.
func proxyContenders(upstream string) []struct {
	Name    string
	Handler http.Handler // nil: the client talks to the upstream
} {
	u, _ := url.Parse(upstream)
	rp := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.Out.URL.Path = u.Path },
		Transport: benchTransport(),
	}
	ring, err := reqstate.GenerateKeyRing("bench", nil)
	if err != nil {
		panic(err)
	}
	guard := mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: replay.NewMemory(nil)})
	// The proxy's own default transport, as `mrtr proxy` runs it (to a
	// plain-HTTP upstream: HTTP/1.1 on the handler's goroutine, 256 idle
	// connections).
	px, err := proxy.New(proxy.Options{Upstream: upstream, Guard: guard})
	if err != nil {
		panic(err)
	}
	return []struct {
		Name    string
		Handler http.Handler
	}{{"direct", nil}, {"reverseproxy", rp}, {"mrtr", px}}
}

func benchTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return t
}

// BenchmarkProxy runs the same 2-round flow (two POSTs over loopback) per
// op against one lean upstream, directly and through each proxy, as
// sub-benchmarks of one run. Allocations and cpu-ns/op (CPU time of all
// threads per flow) count client, proxy and upstream, all in this process.
// The goal is mrtr at most 1.25x reverseproxy per flow, judged by the
// median of paired ratios: ./proxy_interleaved.sh runs the three
// sub-benchmarks once per round, each in its own process, in an order
// rotated every round, and pairs the rounds:
//
//	go test -run '^$' -bench Proxy -count 5
//	./proxy_interleaved.sh 5
func BenchmarkProxy(b *testing.B) {
	up := httptest.NewServer(leanUpstream())
	defer up.Close()
	for _, ct := range proxyContenders(up.URL + "/mcp") {
		b.Run(ct.Name, func(b *testing.B) {
			target := up.URL + "/mcp"
			if ct.Handler != nil {
				px := httptest.NewServer(ct.Handler)
				defer px.Close()
				target = px.URL + "/mcp"
			}
			c := &http.Client{Transport: benchTransport()}
			defer c.CloseIdleConnections()
			if err := proxyFlow(c, target); err != nil { // warm the connections
				b.Fatal(err)
			}
			b.ReportAllocs()
			runtime.GC()
			cpu := processCPU()
			b.ResetTimer()
			for b.Loop() {
				if err := proxyFlow(c, target); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if cpu > 0 {
				b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}
