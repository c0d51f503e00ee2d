package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// methodLog counts what reaches an upstream, by HTTP method and by
// whether a session id came with it.
type methodLog struct {
	mu          sync.Mutex
	methods     map[string]int
	withSession int
	next        http.Handler
}

func (m *methodLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.methods[r.Method]++
	if r.Header.Get("Mcp-Session-Id") != "" {
		m.withSession++
	}
	m.mu.Unlock()
	m.next.ServeHTTP(w, r)
}

// TestLegacySessionPassThrough: a 2025-11-25 client (go-sdk v1.8.0) runs a
// whole session through the proxy against a stateful go-sdk server:
// initialize, the session id, the GET stream, a server-to-client
// elicitation request in the middle of a tool call, and the DELETE.
func TestLegacySessionPassThrough(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "legacy", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "greet", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Your name?", RequestedSchema: &jsonschema.Schema{
				Type: "object", Properties: map[string]*jsonschema.Schema{"name": {Type: "string"}},
			}})
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("hello %v", res.Content["name"])}}}, nil, nil
		})
	log := &methodLog{methods: map[string]int{}, next: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)}
	up := httptest.NewServer(log)
	defer up.Close()
	px := startProxy(t, up.URL+"/mcp", nil, nil, nil)

	client := mcp.NewClient(&mcp.Implementation{Name: "old-client", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
	})
	ctx := context.Background()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: px.URL}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	if got := cs.InitializeResult().ProtocolVersion; got != "2025-11-25" {
		t.Fatalf("negotiated %q", got)
	}
	if cs.ID() == "" {
		t.Fatal("no session id came through the proxy")
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "hello Ada" {
		t.Fatalf("tool result %q", got)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if log.methods["GET"] == 0 || log.methods["DELETE"] != 1 || log.methods["POST"] < 4 || log.withSession < 3 {
		t.Fatalf("upstream saw %v, %d with a session id; want the GET stream, POSTs with the session and one DELETE", log.methods, log.withSession)
	}
}

// TestStreamsRelayedFrameByFrame: a GET stream and a
// subscriptions/listen stream each deliver their first event through the
// proxy while the upstream still holds the second one back until the
// client has seen the first.
func TestStreamsRelayedFrameByFrame(t *testing.T) {
	gates := map[string]chan struct{}{"GET": make(chan struct{}), "POST": make(chan struct{})}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		fmt.Fprint(w, "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/first\"}\n\n")
		rc.Flush()
		select {
		case <-gates[r.Method]:
			fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/second\"}\n\n")
		case <-r.Context().Done():
		}
	}))
	defer up.Close()
	px := startProxy(t, up.URL, nil, nil, nil)
	for _, m := range []string{"GET", "POST"} {
		var body *strings.Reader
		if m == "POST" {
			body = strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"subscriptions/listen","params":{}}`)
		} else {
			body = strings.NewReader("")
		}
		req, _ := http.NewRequest(m, px.URL, body)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		var seen []string
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: stream ended (%v) after %q", m, err, seen)
			}
			seen = append(seen, line)
			if strings.Contains(line, "notifications/first") {
				close(gates[m])
			}
			if strings.Contains(line, "notifications/second") {
				break
			}
		}
		resp.Body.Close()
	}
}
