//go:build unix

package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/internal/rpc"
	"github.com/mrtr-go/mrtr/internal/stdio"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// benchServer is the upstream of the benchmarks: go-sdk v1.8.0 with one
// tool that pauses once the 2026-07-28 way (InputRequests plus a plain
// requestState). To a 2025-11-25 client go-sdk sends that as a mid-call
// elicitation/create and runs the handler again with the answer; to a
// 2026-07-28 client it is an input_required result. server/discover is
// refused, as a legacy server would.
func benchServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	type item struct {
		Item string `json:"item"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "delete"}, func(ctx context.Context, req *mcp.CallToolRequest, in item) (*mcp.CallToolResult, any, error) {
		ans, ok := req.Params.InputResponses["confirm"].(*mcp.ElicitResult)
		if !ok {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
				Message: "Delete " + in.Item + "?", RequestedSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"ok": {Type: "boolean"}}},
			}}, RequestState: "delete:" + in.Item}, nil, nil
		}
		if ans.Action != "accept" || ans.Content["ok"] != true {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "kept " + in.Item}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted " + in.Item}}}, nil, nil
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "server/discover" {
				return nil, &benchRPCError{Code: -32601, Message: "Method not found"}
			}
			return next(ctx, method, req)
		}
	})
	return s
}

type benchRPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *benchRPCError) Error() string { return e.Message }

// runBenchServer is the child's side: the test binary run again with
// serverVar set to "stdio" (benchServer over stdin and stdout) or "http"
// (benchServer's stateless Streamable HTTP handler on a loopback port,
// whose address it prints as one JSON line; it serves until stdin ends).
func runBenchServer(mode string) int {
	s := benchServer()
	switch mode {
	case "stdio":
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			return 1
		}
		return 0
	case "http":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go http.Serve(ln, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
		fmt.Printf("{\"addr\":%q}\n", ln.Addr().String())
		_, _ = io.Copy(io.Discard, os.Stdin)
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown mode", mode)
	return 2
}

// startServer starts benchServer as a child process, as mrtr proxy starts
// a command upstream (its stderr to a logger).
func startServer(mode string) (*stdio.Child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return stdio.Start(stdio.Config{Path: exe, Env: []string{serverVar + "=" + mode}, Logger: slog.New(slog.DiscardHandler)})
}

// childUpstream is a stdio child as the bridge's Upstream (as in
// cmd/mrtr).
type childUpstream struct{ *stdio.Child }

func (c childUpstream) Close(ctx context.Context) error {
	err := c.Stop(ctx)
	var exit interface{ ExitCode() int }
	if errors.As(err, &exit) {
		return nil
	}
	return err
}

func dialServer(context.Context) (bridge.Upstream, error) {
	ch, err := startServer("stdio")
	if err != nil {
		return nil, err
	}
	return childUpstream{ch}, nil
}

func benchProxy(tb testing.TB, upstream string, rt http.RoundTripper) http.Handler {
	tb.Helper()
	ring, err := reqstate.GenerateKeyRing("bench", nil)
	if err != nil {
		tb.Fatal(err)
	}
	h, err := proxy.New(proxy.Options{Upstream: upstream, Transport: rt,
		Guard: mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: replay.NewMemory(nil)})})
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

const benchMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`

var round1 = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete","arguments":{"item":"a"},` + benchMeta + `}}`)

func round2(key, state string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"delete","arguments":{"item":"a"},"requestState":"` + state +
		`","inputResponses":{"` + key + `":{"action":"accept","content":{"ok":true}}},` + benchMeta + `}}`)
}

// ttfbWriter records when the handler first writes a byte of the body
// (or flushes).
type ttfbWriter struct {
	*httptest.ResponseRecorder
	start time.Time
	first time.Duration
}

func (w *ttfbWriter) mark() {
	if w.first == 0 {
		w.first = time.Since(w.start)
	}
}

func (w *ttfbWriter) Write(p []byte) (int, error) {
	w.mark()
	return w.ResponseRecorder.Write(p)
}

func (w *ttfbWriter) Flush() {
	w.mark()
	w.ResponseRecorder.Flush()
}

func (w *ttfbWriter) Unwrap() http.ResponseWriter { return w.ResponseRecorder }

// serveOnce runs one POST through h, in process: no network between the
// client and the proxy, so what the process spends is the proxy's.
func serveOnce(h http.Handler, body []byte) *ttfbWriter {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("Mcp-Protocol-Version", "2026-07-28") // as a 2026-07-28 client sends them
	r.Header.Set("Mcp-Method", "tools/call")
	r.Header.Set("Mcp-Name", "delete")
	w := &ttfbWriter{ResponseRecorder: httptest.NewRecorder(), start: time.Now()}
	h.ServeHTTP(w, r)
	return w
}

// stateIn finds the requestState of a response (JSON or an event stream);
// a sealed token is base64url, so it needs no unescaping.
func stateIn(body []byte) (string, bool) {
	_, rest, ok := bytes.Cut(body, []byte(`"requestState":"`))
	if !ok {
		return "", false
	}
	st, _, ok := bytes.Cut(rest, []byte(`"`))
	return string(st), ok
}

// inputKeyIn is the one key of a response's inputRequests.
func inputKeyIn(body []byte) (string, error) {
	msg := body
	if i := bytes.LastIndex(body, []byte("data: ")); i >= 0 {
		msg, _, _ = bytes.Cut(body[i+len("data: "):], []byte("\n"))
	}
	var m struct {
		Result struct {
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return "", fmt.Errorf("round 1: %w: %s", err, body)
	}
	for k := range m.Result.InputRequests {
		if len(m.Result.InputRequests) == 1 {
			return k, nil
		}
	}
	return "", fmt.Errorf("round 1: want one input request: %s", body)
}

// benchFlow is one way to run the 2-round flow; run returns the time to
// the first byte of the pause.
type benchFlow interface {
	run() (time.Duration, error)
}

// proxyFlow runs the flow through the sealing proxy: a call that pauses,
// the retry with the answer and the token.
type proxyFlow struct {
	h   http.Handler
	key string // the input request's key, as the proxy names it
}

func newProxyFlow(h http.Handler) (*proxyFlow, error) {
	w := serveOnce(h, round1)
	key, err := inputKeyIn(w.Body.Bytes())
	if err != nil {
		return nil, err
	}
	st, _ := stateIn(w.Body.Bytes())
	if w := serveOnce(h, round2(key, st)); !bytes.Contains(w.Body.Bytes(), []byte("deleted a")) {
		return nil, fmt.Errorf("round 2: %d %s", w.Code, w.Body)
	}
	return &proxyFlow{h: h, key: key}, nil
}

func (f *proxyFlow) run() (time.Duration, error) {
	w := serveOnce(f.h, round1)
	st, ok := stateIn(w.Body.Bytes())
	if w.Code != http.StatusOK || !ok {
		return 0, fmt.Errorf("round 1: %d %s", w.Code, w.Body)
	}
	ttfb := w.first
	if w := serveOnce(f.h, round2(f.key, st)); w.Code != http.StatusOK || !bytes.Contains(w.Body.Bytes(), []byte("deleted a")) {
		return 0, fmt.Errorf("round 2: %d %s", w.Code, w.Body)
	}
	return ttfb, nil
}

// floorFlow is a 2025-11-25 client on the server's pipes: the call, the
// server's elicitation/create answered, the result. No proxy.
type floorFlow struct {
	conn    *rpc.Conn
	asked   atomic.Int64 // when the elicitation arrived, unix ns
	answers atomic.Int64
}

func newFloorFlow(tb testing.TB) (*floorFlow, error) {
	ch, err := startServer("stdio")
	if err != nil {
		return nil, err
	}
	tb.Cleanup(func() { childUpstream{ch}.Close(context.Background()) })
	f := &floorFlow{}
	f.conn = rpc.NewConn(ch, func(m *rpc.Message) {
		if m.IsRequest() && m.Method == "elicitation/create" {
			f.asked.Store(time.Now().UnixNano())
			f.answers.Add(1)
			_ = f.conn.Respond(m.ID, json.RawMessage(`{"action":"accept","content":{"ok":true}}`))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := f.conn.Call(ctx, "initialize", json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"bench","version":"1"}}`))
	if err != nil {
		return nil, err
	}
	if m.Error != nil || !bytes.Contains(m.Result, []byte(`"2025-11-25"`)) {
		return nil, fmt.Errorf("initialize: %s%s", m.Error, m.Result)
	}
	if err := f.conn.Notify("notifications/initialized", nil); err != nil {
		return nil, err
	}
	return f, nil
}

var floorCall = json.RawMessage(`{"name":"delete","arguments":{"item":"a"}}`)

func (f *floorFlow) run() (time.Duration, error) {
	n := f.answers.Load()
	start := time.Now()
	c, err := f.conn.Start("tools/call", floorCall)
	if err != nil {
		return 0, err
	}
	m, ok := <-c.Response()
	if !ok {
		return 0, rpc.ErrClosed
	}
	if m.Error != nil || !bytes.Contains(m.Result, []byte("deleted a")) || f.answers.Load() != n+1 {
		return 0, fmt.Errorf("tools/call: %s%s", m.Error, m.Result)
	}
	return time.Duration(f.asked.Load() - start.UnixNano()), nil
}

// processCPU is the user and system CPU this process has used so far;
// children are not counted.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBridge measures one 2-round elicitation flow (pause, then the
// retry with the answer) against benchServer running as a separate
// process, so this process's CPU is the proxy's own (plus the client's
// few bytes: requests go straight to the handler, no network):
//
//   - bridged: through the sealing proxy and a Bridge to the server over
//     stdio in 2025-11-25 (its mid-call elicitation/create becomes a
//     sealed input_required round);
//   - floor: a 2025-11-25 client on the same server's pipes, no proxy;
//   - modern-stdio: the proxy and Direct, the same server spoken to in
//     2026-07-28 over stdio (it pauses with input_required itself);
//   - modern-http: the proxy with its default transport in front of the
//     same server's Streamable HTTP handler on loopback.
//
// cpu-ns/op is this process's user+system CPU per flow, ttfb-ns the time
// to the first byte of the pause (for floor: to the elicitation/create).
func BenchmarkBridge(b *testing.B) {
	flows := []struct {
		name  string
		setup func(b *testing.B) (benchFlow, error)
	}{
		{"bridged", func(b *testing.B) (benchFlow, error) {
			br := bridge.New(bridge.Options{Dial: dialServer})
			b.Cleanup(func() { br.Close(context.Background()) })
			return newProxyFlow(benchProxy(b, "http://legacy.bridge/mcp", br))
		}},
		{"floor", func(b *testing.B) (benchFlow, error) { return newFloorFlow(b) }},
		{"modern-stdio", func(b *testing.B) (benchFlow, error) {
			d := bridge.NewDirect(dialServer, nil)
			b.Cleanup(func() { d.Close(context.Background()) })
			return newProxyFlow(benchProxy(b, "http://stdio.child/mcp", d))
		}},
		{"modern-http", func(b *testing.B) (benchFlow, error) {
			ch, err := startServer("http")
			if err != nil {
				return nil, err
			}
			b.Cleanup(func() { childUpstream{ch}.Close(context.Background()) })
			var addr struct{ Addr string }
			if err := json.Unmarshal(<-ch.Recv(), &addr); err != nil || addr.Addr == "" {
				return nil, fmt.Errorf("the http server's address: %v", err)
			}
			return newProxyFlow(benchProxy(b, "http://"+addr.Addr+"/mcp", nil))
		}},
	}
	for _, fl := range flows {
		b.Run(fl.name, func(b *testing.B) {
			f, err := fl.setup(b)
			if err != nil {
				b.Fatal(err)
			}
			for range 8 { // warm: connections, pools, the session
				if _, err := f.run(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			var ttfb time.Duration
			cpu := processCPU()
			for b.Loop() {
				t, err := f.run()
				if err != nil {
					b.Fatal(err)
				}
				ttfb += t
			}
			cpu = processCPU() - cpu
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(ttfb.Nanoseconds())/float64(b.N), "ttfb-ns")
		})
	}
}

// heldCalls is how many calls BenchmarkBridgeHeld holds at once.
const heldCalls = 64

type memSample struct {
	heap, stack         uint64
	goroutines, threads int
}

func sampleMem() memSample {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSample{heap: ms.HeapAlloc, stack: ms.StackInuse, goroutines: runtime.NumGoroutine(), threads: osThreads()}
}

// osThreads is the process's thread count (Linux: /proc/self/status), 0
// where it cannot be read. A thread the runtime keeps costs two stacks of
// its own (16 and 32 KiB), counted in StackInuse.
func osThreads() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	_, rest, _ := bytes.Cut(b, []byte("\nThreads:"))
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	n, _ := strconv.Atoi(string(bytes.TrimSpace(line)))
	return n
}

// BenchmarkBridgeHeld measures what a held call costs this process (its
// child excluded): one op pauses heldCalls bridged calls (each on its own
// session, so its own child), samples the live heap and the goroutine
// stacks after a GC, and resumes them all. hold-B is the live heap a
// held call adds to an idle session of its caller, hold-stack-B its
// stacks; session-B, session-stack-B, session-goroutines and
// session-threads are what an idle session (the proxy's side of a child:
// pipes, readers, the JSON-RPC connection) costs, measured once, before
// the loop. The client's tokens are not counted.
func BenchmarkBridgeHeld(b *testing.B) {
	br := bridge.New(bridge.Options{Dial: dialServer, MaxSessions: heldCalls, MaxHolds: heldCalls})
	b.Cleanup(func() { br.Close(context.Background()) })
	h := benchProxy(b, "http://legacy.bridge/mcp", br)
	f, err := newProxyFlow(h) // one session, idle again
	if err != nil {
		b.Fatal(err)
	}
	hold := func() []string {
		states := make([]string, 0, heldCalls)
		for range heldCalls {
			w := serveOnce(h, round1)
			st, ok := stateIn(w.Body.Bytes())
			if !ok {
				b.Fatalf("round 1: %d %s", w.Code, w.Body)
			}
			states = append(states, st)
		}
		if n := br.Stats().Holds; n != heldCalls {
			b.Fatalf("%d calls held, want %d", n, heldCalls)
		}
		return states
	}
	resume := func(states []string) {
		for _, st := range states {
			if w := serveOnce(h, round2(f.key, st)); !bytes.Contains(w.Body.Bytes(), []byte("deleted a")) {
				b.Fatalf("round 2: %d %s", w.Code, w.Body)
			}
		}
	}
	before := sampleMem()
	resume(hold()) // opens the other sessions; all idle afterwards
	idle := sampleMem()
	if s := br.Stats(); s.Sessions != heldCalls || s.Idle != heldCalls {
		b.Fatalf("stats %+v, want %d idle sessions", s, heldCalls)
	}
	var heap, stack int64
	for b.Loop() {
		m0 := sampleMem()
		states := hold()
		m1 := sampleMem()
		tokens := 0
		for _, st := range states {
			tokens += len(st)
		}
		heap += int64(m1.heap-m0.heap) - int64(tokens)
		stack += int64(m1.stack - m0.stack)
		resume(states)
	}
	// After the loop: b.Loop's start deletes metrics reported before it.
	b.ReportMetric(float64(int64(idle.heap-before.heap))/(heldCalls-1), "session-B")
	b.ReportMetric(float64(int64(idle.stack-before.stack))/(heldCalls-1), "session-stack-B")
	b.ReportMetric(float64(idle.goroutines-before.goroutines)/(heldCalls-1), "session-goroutines")
	b.ReportMetric(float64(idle.threads-before.threads)/(heldCalls-1), "session-threads")
	b.ReportMetric(float64(heap)/float64(b.N*heldCalls), "hold-B")
	b.ReportMetric(float64(stack)/float64(b.N*heldCalls), "hold-stack-B")
}

// TestBenchServer keeps the benchmarks' flows working in the normal test
// run: each once, with its answer checked.
func TestBenchServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	br := bridge.New(bridge.Options{Dial: dialServer})
	t.Cleanup(func() { br.Close(context.Background()) })
	f, err := newProxyFlow(benchProxy(t, "http://legacy.bridge/mcp", br))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(f.key, "elicitation-") {
		t.Fatalf("bridged input key %q", f.key)
	}
	floor, err := newFloorFlow(t)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := floor.run(); err != nil {
		t.Fatal(err)
	}
}

// TestSessionCost pins what an idle bridged session (a held call's
// session, its child aside) costs the proxy in goroutines and threads, the
// most of a held call's memory (issue 20: at most 32 KiB per held call):
// at most four goroutines (the child's wait, its stdout and stderr
// readers, the JSON-RPC reader, which also drops the session when the
// child ends) and no OS thread (each costs the runtime 48 KiB of stacks).
func TestSessionCost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	const n = 8
	br := bridge.New(bridge.Options{Dial: dialServer, MaxSessions: n, MaxHolds: n})
	t.Cleanup(func() { br.Close(context.Background()) })
	h := benchProxy(t, "http://legacy.bridge/mcp", br)
	f, err := newProxyFlow(h) // one session, idle again
	if err != nil {
		t.Fatal(err)
	}
	before := sampleMem()
	states := make([]string, 0, n)
	for range n { // n calls held at once: n sessions
		w := serveOnce(h, round1)
		st, ok := stateIn(w.Body.Bytes())
		if !ok {
			t.Fatalf("round 1: %d %s", w.Code, w.Body)
		}
		states = append(states, st)
	}
	for _, st := range states {
		if w := serveOnce(h, round2(f.key, st)); !bytes.Contains(w.Body.Bytes(), []byte("deleted a")) {
			t.Fatalf("round 2: %d %s", w.Code, w.Body)
		}
	}
	after := sampleMem()
	if s := br.Stats(); s.Sessions != n || s.Idle != n {
		t.Fatalf("stats %+v, want %d idle sessions", s, n)
	}
	// One more goroutine may not have returned yet from serving the last
	// request; five per session would be 5*(n-1).
	if g := after.goroutines - before.goroutines; g > 4*(n-1)+1 {
		t.Errorf("%d more idle sessions added %d goroutines, want at most %d", n-1, g, 4*(n-1)+1)
	}
	// The runtime may add a thread of its own (Go never ends one); one per
	// child would add n-1.
	if th := after.threads - before.threads; th > 2 {
		t.Errorf("%d more idle sessions added %d OS threads, want at most 2", n-1, th)
	}
}
