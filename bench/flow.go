package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/audit"
	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/internal/app/observe"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// The flow benchmark runs one 2-round elicitation flow, the same "deploy"
// tool three ways, over loopback HTTP against go-sdk v1.8.0:
//
//   - sealed: through mrtr (gosdk.Install, gosdk.AddTool with flow.Ask,
//     flow.State and flow.Elicited), the guard on default options with
//     the in-memory single-use store, as `mrtr serve` runs by default;
//   - sealed-nostore: the same without a single-use store;
//   - sealed-observed: sealed with metrics and tracing on, as `mrtr serve
//     --metrics-addr` with OTEL_EXPORTER_OTLP_ENDPOINT runs: the guard's
//     Observer feeds the Prometheus metrics (on a registry of its own) and
//     an OpenTelemetry tracer provider that samples every span and batches
//     it to an exporter that counts and drops it;
//   - sealed-audited: sealed with the audit trail on, as `mrtr serve
//     --audit PATH --audit-key FILE` runs (signed checkpoints, an
//     evolving key): the guard's Auditor (audit.Writer) appends
//     three lines a flow (paused, resumed, completed) to a file in a
//     temporary directory, one write(2) each;
//   - plain: go-sdk alone (mcp.AddTool), the state a plaintext string
//     "service=api;env=production" parsed back on the retry, as go-sdk's
//     own examples do.
//
// All three are served by one httptest server (one process, one mux, three
// paths), so they run under the same conditions.

// FlowEndpoint is one way of serving the deploy tool.
type FlowEndpoint struct {
	Name string // sub-benchmark name
	Path string // on the FlowServer
}

// FlowEndpoints are the ways the deploy tool is served, in benchmark order.
var FlowEndpoints = []FlowEndpoint{
	{Name: "sealed", Path: "/sealed"},
	{Name: "sealed-nostore", Path: "/sealed-nostore"},
	{Name: "sealed-observed", Path: "/sealed-observed"},
	{Name: "sealed-audited", Path: "/sealed-audited"},
	{Name: "plain", Path: "/plain"},
}

// FlowProtocol is the protocol version the client connects at.
const FlowProtocol = "2026-07-28"

// FlowArgs are the deploy tool's arguments.
type FlowArgs struct {
	Service string `json:"service"`
	Env     string `json:"env"`
}

// FlowState is the continuation the sealed tool carries between rounds.
type FlowState struct {
	Service string `json:"service"`
	Env     string `json:"env"`
}

// FlowCallArgs are the arguments of every benchmarked call, and
// FlowWant the text every complete flow must return.
var (
	FlowCallArgs = map[string]any{"service": "api", "env": "production"}
	FlowWant     = "deployed api to production"
)

// FlowServer serves the deploy tool on every FlowEndpoint.
type FlowServer struct {
	URL   string
	Store *replay.Memory // the single-use store of the sealed endpoint

	// Of the sealed-observed endpoint: its metrics, its tracer provider
	// and the spans its exporter received.
	Registry *prometheus.Registry
	Tracing  *sdktrace.TracerProvider
	Spans    *SpanCounter

	// Of the sealed-audited endpoint: the trail file and its ring.
	AuditPath string
	AuditRing *reqstate.KeyRing
	audit     *audit.Writer
	auditDir  string

	srv      *httptest.Server
	clients  []*http.Transport // of Connect, closed by Close
	conns    atomic.Int64      // TCP connections accepted
	requests atomic.Int64      // HTTP requests served
	runs     atomic.Int64      // tool handler runs, both rounds, all endpoints
}

func confirm(service, env string) mcp.InputRequestMap {
	return mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
		Message: "deploy " + service + " to " + env + "?",
		RequestedSchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{"approve": map[string]any{"type": "boolean"}},
			"required":   []string{"approve"},
		},
	}}
}

func approved(r *mcp.ElicitResult) bool {
	return r != nil && r.Action == "accept" && r.Content["approve"] == true
}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

var cancelled = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "deployment cancelled"}}}

// newSealedServer returns an MCP server whose deploy tool pauses through
// mrtr, guarded by a default guard over store (nil: no single-use store)
// reporting to obs (nil: none).
func (fs *FlowServer) newSealedServer(store replay.Store, obs mrtr.Observer) *mcp.Server {
	return fs.newSealedServerAudited(store, obs, false)
}

// newSealedServerAudited is newSealedServer, with the audit trail of
// the sealed-audited endpoint when audited.
func (fs *FlowServer) newSealedServerAudited(store replay.Store, obs mrtr.Observer, audited bool) *mcp.Server {
	ring, err := reqstate.GenerateKeyRing("bench", nil)
	if err != nil {
		panic(err)
	}
	codec := reqstate.New(ring, nil)
	opts := &mrtr.Options{Store: store, Observer: obs}
	if audited {
		if fs.auditDir, err = os.MkdirTemp("", "mrtr-bench-audit-"); err != nil {
			panic(err)
		}
		fs.AuditPath, fs.AuditRing = filepath.Join(fs.auditDir, "audit.jsonl"), ring
		// As mrtr serve --audit PATH --audit-key FILE runs: checkpoints
		// signed by a node key that evolves (the command's defaults:
		// every 10 s, epochs of 15 min), each logged as a JSON record.
		key := filepath.Join(fs.auditDir, "audit.key")
		if _, err := audit.GenerateKeyFile(key, nil); err != nil {
			panic(err)
		}
		signer, err := audit.LoadSigner(key)
		if err != nil {
			panic(err)
		}
		log := slog.New(slog.NewJSONHandler(io.Discard, nil))
		if fs.audit, err = audit.OpenFile(fs.AuditPath, &audit.Options{Keys: codec.KeyRing, Node: "bench", Signer: signer,
			OnCheckpoint: func(c audit.Checkpoint) { log.Info("mrtr audit checkpoint", audit.CheckpointLogKey, c) }}); err != nil {
			panic(err)
		}
		opts.Auditor = fs.audit
	}
	g := mrtr.New(codec, opts)
	s := mcp.NewServer(&mcp.Implementation{Name: "bench-sealed", Version: "1"}, nil)
	a := gosdk.Install(s, g, nil)
	gosdk.AddTool(a, &mcp.Tool{Name: "deploy", Description: "deploy a service"},
		func(ctx context.Context, req *mcp.CallToolRequest, args FlowArgs, flow *gosdk.ToolFlow[FlowState]) (*mcp.CallToolResult, error) {
			fs.runs.Add(1)
			st, resumed := flow.State()
			if !resumed {
				return flow.Ask(FlowState(args), confirm(args.Service, args.Env))
			}
			ans, ok := flow.Elicited("confirm")
			if !ok {
				return flow.Ask(st, confirm(st.Service, st.Env))
			}
			if !approved(ans) {
				return cancelled, nil
			}
			return textResult(fmt.Sprintf("deployed %s to %s", st.Service, st.Env)), nil
		})
	return s
}

// newPlainServer returns an MCP server whose deploy tool pauses with
// go-sdk alone: a plaintext requestState, echoed by the client and parsed
// back on the retry.
func (fs *FlowServer) newPlainServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "bench-plain", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "deploy", Description: "deploy a service"},
		func(ctx context.Context, req *mcp.CallToolRequest, args FlowArgs) (*mcp.CallToolResult, any, error) {
			fs.runs.Add(1)
			p := req.Params
			if p.RequestState == "" {
				return &mcp.CallToolResult{
					InputRequests: confirm(args.Service, args.Env),
					RequestState:  "service=" + args.Service + ";env=" + args.Env,
				}, nil, nil
			}
			st, err := parsePlainState(p.RequestState)
			if err != nil {
				return nil, nil, err
			}
			ans, _ := p.InputResponses["confirm"].(*mcp.ElicitResult)
			if ans == nil {
				return &mcp.CallToolResult{InputRequests: confirm(st.Service, st.Env), RequestState: p.RequestState}, nil, nil
			}
			if !approved(ans) {
				return cancelled, nil, nil
			}
			return textResult(fmt.Sprintf("deployed %s to %s", st.Service, st.Env)), nil, nil
		})
	return s
}

// parsePlainState parses "service=X;env=Y".
func parsePlainState(s string) (FlowState, error) {
	var st FlowState
	for kv := range strings.SplitSeq(s, ";") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "service":
			st.Service = v
		case "env":
			st.Env = v
		}
	}
	if st.Service == "" || st.Env == "" {
		return st, errors.New("bad requestState")
	}
	return st, nil
}

// NewFlowServer starts the loopback server (127.0.0.1). The sealed
// endpoints are served by gosdk.NewHTTPHandler, as `mrtr serve` does; the
// plain one by go-sdk's stateless Streamable HTTP handler with the same
// settings (event-stream responses, default body limit), which is what
// serves 2026-07-28 behind gosdk.NewHTTPHandler.
func NewFlowServer() *FlowServer {
	fs := &FlowServer{Store: replay.NewMemory(nil)}
	mux := http.NewServeMux()
	mux.Handle("/sealed", gosdk.NewHTTPHandler(fs.newSealedServer(fs.Store, nil), nil))
	mux.Handle("/sealed-nostore", gosdk.NewHTTPHandler(fs.newSealedServer(nil, nil), nil))
	mux.Handle("/sealed-observed", gosdk.NewHTTPHandler(fs.newSealedServer(replay.NewMemory(nil), fs.newObserver()), nil))
	mux.Handle("/sealed-audited", gosdk.NewHTTPHandler(fs.newSealedServerAudited(replay.NewMemory(nil), nil, true), nil))
	plain := fs.newPlainServer()
	mux.Handle("/plain", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return plain },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	fs.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fs.requests.Add(1)
		mux.ServeHTTP(w, r)
	}))
	fs.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			fs.conns.Add(1)
		}
	}
	fs.srv.Start()
	fs.URL = fs.srv.URL
	return fs
}

// Close shuts the server down and closes the idle connections of the
// clients Connect made.
func (fs *FlowServer) Close() {
	fs.srv.Close()
	for _, t := range fs.clients {
		t.CloseIdleConnections()
	}
	fs.Tracing.Shutdown(context.Background())
	fs.audit.Close()
	os.RemoveAll(fs.auditDir)
}

// newObserver sets up the sealed-observed endpoint's metrics and tracing.
func (fs *FlowServer) newObserver() mrtr.Observer {
	fs.Registry = prometheus.NewRegistry()
	fs.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := observe.NewMetrics(fs.Registry)
	if err != nil {
		panic(err)
	}
	fs.Spans = new(SpanCounter)
	fs.Tracing = sdktrace.NewTracerProvider(sdktrace.WithBatcher(fs.Spans))
	return observe.Observers{m, observe.NewTracer(fs.Tracing)}
}

// SpanCounter is a span exporter that counts the spans it gets and drops
// them.
type SpanCounter struct{ n atomic.Int64 }

// ExportSpans counts spans.
func (c *SpanCounter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	c.n.Add(int64(len(spans)))
	return nil
}

// Shutdown does nothing.
func (c *SpanCounter) Shutdown(context.Context) error { return nil }

// Count is the number of spans exported so far.
func (c *SpanCounter) Count() int64 { return c.n.Load() }

// Counters reports the TCP connections accepted, HTTP requests served and
// tool handler runs so far.
func (fs *FlowServer) Counters() (conns, requests, runs int64) {
	return fs.conns.Load(), fs.requests.Load(), fs.runs.Load()
}

// FlowClientOptions returns go-sdk client options whose elicitation
// handler approves every request. manual disables the client's automatic
// Multi Round-Trip loop.
func FlowClientOptions(manual bool) *mcp.ClientOptions {
	o := &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
		},
	}
	if manual {
		o.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	return o
}

// Connect connects a go-sdk client to endpoint path at FlowProtocol over
// Streamable HTTP, with its own connection pool. It is not safe for
// concurrent use.
func (fs *FlowServer) Connect(ctx context.Context, path string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	ht := http.DefaultTransport.(*http.Transport).Clone()
	fs.clients = append(fs.clients, ht)
	tr := &mcp.StreamableClientTransport{Endpoint: fs.URL + path, HTTPClient: &http.Client{Transport: ht}}
	c := mcp.NewClient(&mcp.Implementation{Name: "bench-client", Version: "1"}, opts)
	cs, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: FlowProtocol})
	if err != nil {
		return nil, err
	}
	if v := cs.InitializeResult().ProtocolVersion; v != FlowProtocol {
		cs.Close()
		return nil, fmt.Errorf("negotiated protocol %q, want %q", v, FlowProtocol)
	}
	return cs, nil
}

// FlowCall runs one complete flow: a CallTool that the client's loop
// carries through both rounds. It returns the text of the result.
func FlowCall(ctx context.Context, cs *mcp.ClientSession) (string, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "deploy", Arguments: FlowCallArgs})
	if err != nil {
		return "", err
	}
	if res.IsError || res.NeedsInput() || len(res.Content) != 1 {
		return "", fmt.Errorf("unexpected result: error %v, needs input %v, %d contents", res.IsError, res.NeedsInput(), len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return "", fmt.Errorf("content is %T, want text", res.Content[0])
	}
	return tc.Text, nil
}
