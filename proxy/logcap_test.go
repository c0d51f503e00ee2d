package proxy_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/proxy"
)

// lockedBuffer is a bytes.Buffer for a logger that handlers write to
// concurrently.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLogCapsTarget: a tool name as long as the body limit allows reaches
// the proxy's log lines cut to 256 bytes: the guard's refusal, the
// proxy's own refusal of a requestState that is not a string, and an
// upstream failure.
func TestLogCapsTarget(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusBadGateway)
	}))
	defer up.Close()
	for _, tc := range []struct {
		name  string
		state any
		want  string
	}{
		{"guard refusal", "not-a-token", "requestState rejected"},
		{"not a string", 5, "requestState rejected"},
		{"upstream error", nil, "upstream answered an HTTP error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := new(lockedBuffer)
			log := slog.New(slog.NewTextHandler(logs, nil))
			srv := startProxy(t, up.URL, nil, &mrtr.Options{Logger: log}, &proxy.Options{AnyHost: true, Logger: log})
			params := map[string]any{"name": strings.Repeat("x", proxy.DefaultMaxBodyBytes-1024), "arguments": map[string]any{}}
			if tc.state != nil {
				params["requestState"] = tc.state
			}
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
			req, _ := http.NewRequest("POST", srv.URL, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got := logs.String()
			if !strings.Contains(got, tc.want) || !strings.Contains(got, "target="+strings.Repeat("x", 253)+"… ") || len(got) > 2048 {
				t.Fatalf("HTTP %d, %d bytes of log, want %q with the target cut: %.600s", resp.StatusCode, len(got), tc.want, got)
			}
		})
	}
}
