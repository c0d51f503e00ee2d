package bench

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mrtr-go/mrtr/audit"
)

// TestFlow proves every endpoint of BenchmarkFlow measures a working
// path: each call completes in exactly two rounds (two handler runs, two
// HTTP requests), mostly on a reused connection, and returns the right text.
func TestFlow(t *testing.T) {
	fs := NewFlowServer()
	defer fs.Close()
	for _, ep := range FlowEndpoints {
		t.Run(ep.Name, func(t *testing.T) {
			cs, err := fs.Connect(t.Context(), ep.Path, FlowClientOptions(false))
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if _, err := FlowCall(t.Context(), cs); err != nil { // warm the connection
				t.Fatal(err)
			}
			const n = 50
			conns0, reqs0, runs0 := fs.Counters()
			for range n {
				got, err := FlowCall(t.Context(), cs)
				if err != nil {
					t.Fatal(err)
				}
				if got != FlowWant {
					t.Fatalf("got %q, want %q", got, FlowWant)
				}
			}
			conns, reqs, runs := fs.Counters()
			if d := runs - runs0; d != 2*n {
				t.Errorf("%d handler runs for %d calls, want %d", d, n, 2*n)
			}
			if d := reqs - reqs0; d != 2*n {
				t.Errorf("%d HTTP requests for %d calls, want %d", d, n, 2*n)
			}
			if ep.Name == "sealed-observed" {
				// Metrics and tracing saw every flow (the warm-up too): one
				// accepted resume and two spans (pause, resume) each.
				if err := fs.Tracing.ForceFlush(t.Context()); err != nil {
					t.Fatal(err)
				}
				if got := fs.Spans.Count(); got != 2*(n+1) {
					t.Errorf("%d spans exported, want %d", got, 2*(n+1))
				}
				if got := gathered(t, fs.Registry, "mrtr_resumes_total", "outcome", "ok"); got != n+1 {
					t.Errorf("mrtr_resumes_total{outcome=\"ok\"} = %v, want %d", got, n+1)
				}
			}
			if ep.Name == "sealed-audited" {
				// Three lines a flow (the warm-up too): paused, resumed,
				// completed, after the first checkpoint (and any the timer
				// wrote since), one chain that verifies.
				f, err := os.Open(fs.AuditPath)
				if err != nil {
					t.Fatal(err)
				}
				res, err := audit.Verify(f, fs.AuditRing, nil)
				f.Close()
				if err != nil || res.Lines < 3*(n+1)+1 || res.Lines > 3*(n+1)+3 {
					t.Errorf("trail: %d lines, %v; want %d", res.Lines, err, 3*(n+1))
				}
			}
			// go-sdk's client now and then dials anew (about one call in
			// a hundred, on every endpoint alike); most calls must reuse.
			if d := conns - conns0; d > n/10 {
				t.Errorf("%d new connections for %d calls: keep-alive is not working", d, n)
			}
		})
	}
}

// TestFlowState checks by hand what each endpoint puts on the wire: the
// plain one its plaintext state, the sealed ones an opaque token that
// does not open once altered, and only the sealed endpoint with a store
// refuses the second use of a token.
func TestFlowState(t *testing.T) {
	fs := NewFlowServer()
	defer fs.Close()
	for _, ep := range FlowEndpoints {
		t.Run(ep.Name, func(t *testing.T) {
			cs, err := fs.Connect(t.Context(), ep.Path, FlowClientOptions(true))
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: FlowCallArgs})
			if err != nil {
				t.Fatal(err)
			}
			if !res.NeedsInput() || res.InputRequests["confirm"] == nil || res.RequestState == "" {
				t.Fatalf("round 1 did not pause: %+v", res)
			}
			state := res.RequestState
			sealed := ep.Name != "plain"
			if !sealed && state != "service=api;env=production" {
				t.Fatalf("plain state %q", state)
			}
			// Short words could occur in random base64url by chance; these cannot.
			if sealed && (strings.Contains(state, "service") || strings.Contains(state, "production")) {
				t.Fatalf("sealed state %q shows its content", state)
			}
			retry := func(state string) (*mcp.CallToolResult, error) {
				return cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: FlowCallArgs, RequestState: state,
					InputResponses: mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}}})
			}
			if sealed {
				alt := []byte(state)
				alt[len(alt)/2] ^= 1
				if _, err := retry(string(alt)); !isInvalidState(err) {
					t.Errorf("altered token: %v, want invalid requestState", err)
				}
			}
			for i := range 2 {
				res, err := retry(state)
				if i == 1 && (ep.Name == "sealed" || ep.Name == "sealed-observed" || ep.Name == "sealed-audited") {
					if !isInvalidState(err) {
						t.Errorf("second use of a token: %v, want invalid requestState (single use)", err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("use %d: %v", i+1, err)
				}
				if tc, ok := res.Content[0].(*mcp.TextContent); res.NeedsInput() || len(res.Content) != 1 || !ok || tc.Text != FlowWant {
					t.Fatalf("use %d: %+v", i+1, res)
				}
			}
		})
	}
}

func isInvalidState(err error) bool {
	var je *jsonrpc.Error
	return errors.As(err, &je) && je.Code == -32602 && je.Message == "invalid requestState"
}

// gathered returns the value of the counter name{label="value"} in reg.
func gathered(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return 0
}
