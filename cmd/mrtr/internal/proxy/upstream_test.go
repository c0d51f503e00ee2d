package proxy

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/internal/stdio"
)

// TestProbeHTTP: the era of an HTTP upstream from its answer to a modern
// server/discover, as the spec's client era detection reads it.
func TestProbeHTTP(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"DiscoverResult", 200, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28"]}}`, eraModern},
		{"DiscoverResult of older versions only", 200, `{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2025-11-25"]}}`, eraLegacy},
		{"header mismatch", 400, `{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"m"}}`, eraModern},
		{"missing capability", 400, `{"jsonrpc":"2.0","id":1,"error":{"code":-32021,"message":"m"}}`, eraModern},
		{"unsupported version", 400, `{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"m","data":{"supported":["2026-07-28","2027-01-01"]}}}`, eraModern},
		{"unsupported version, older ones named", 400, `{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"m","data":{"supported":["2025-11-25"]}}}`, eraLegacy},
		{"method not found, 404", 404, `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"m"}}`, eraModern},
		{"method not found, 400", 400, `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"m"}}`, eraLegacy},
		{"not initialized (TypeScript SDK 1.x)", 400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Server not initialized"}}`, eraLegacy},
		{"plain text", 400, `Bad Request: No valid session ID provided`, eraLegacy},
		{"server error", 500, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"m"}}`, ""},
		{"unauthorized", 401, `{"error":"invalid_token"}`, ""},
		{"forbidden", 403, `forbidden`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Mcp-Protocol-Version") != "2026-07-28" || r.Header.Get("Mcp-Method") != "server/discover" {
					t.Errorf("probe headers %v", r.Header)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			era, err := probeHTTP(context.Background(), http.DefaultTransport, srv.URL+"/mcp")
			if tc.want == "" { // the answer tells nothing: the proxy warns and takes it as modern
				if err == nil {
					t.Fatalf("era %q, want an error", era)
				}
				return
			}
			if err != nil || era != tc.want {
				t.Fatalf("era %q (%v), want %q", era, err, tc.want)
			}
		})
	}
}

// The waiting record repeats, with less time left each time.
func TestProbeStdioWaitRepeats(t *testing.T) {
	logs := new(testcmd.Buffer)
	log := slog.New(slog.NewJSONHandler(logs, nil))
	dial := func(context.Context) (bridge.Upstream, error) {
		ch, err := stdio.Start(stdio.Config{Path: "sleep", Args: []string{"600"}, Logger: log})
		if err != nil {
			return nil, err
		}
		return childUpstream{Child: ch}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan string, 1)
	go func() {
		era, _, _ := probeStdio(ctx, dial, log, "sleep", time.Minute, time.Second)
		done <- era
	}()
	deadline := time.Now().Add(testcmd.Patience)
	for len(testcmd.Lines(logs.String(), "mrtr proxy: waiting for the upstream command to answer server/discover")) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("one waiting record at most: %s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	recs := testcmd.Lines(logs.String(), "mrtr proxy: waiting for the upstream command to answer server/discover")
	left0, left1 := recs[0]["left"].(float64), recs[1]["left"].(float64)
	if left0 != float64(time.Minute) || left1 >= left0 {
		t.Fatalf("left %v then %v, want a minute then less", left0, left1)
	}
}
