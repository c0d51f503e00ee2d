package proxy_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/reqstate"
)

// TestCheckUpstream: the probe tells a 404 (the wrong path) and a 5xx
// from an upstream that answers, in either era; a 404 inside a session
// (an expired Mcp-Session-Id) is no failure of the upstream, while three
// 404s outside any session are one warning.
func TestCheckUpstream(t *testing.T) {
	status := http.StatusOK
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") != "" {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		w.WriteHeader(status)
	}))
	defer up.Close()
	logs := new(lockedBuffer)
	h, err := proxy.New(proxy.Options{
		Upstream: up.URL + "/mcp", Guard: mrtr.New(reqstate.New(testRing(t), nil), nil),
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		status int
		want   int // 0: no error
	}{{200, 0}, {400, 0}, {405, 0}, {404, 404}, {502, 502}, {500, 500}} {
		status = tc.status
		err := h.CheckUpstream(context.Background())
		var se *proxy.UpstreamStatusError
		if tc.want == 0 && err != nil || tc.want != 0 && (!errors.As(err, &se) || se.Status != tc.want) {
			t.Errorf("upstream answering %d: %v", tc.status, err)
		}
	}
	status = http.StatusOK
	h.CheckUpstream(context.Background()) // ends the run of failures above
	proxySrv := httptest.NewServer(h)
	defer proxySrv.Close()
	for range 3 {
		req, _ := http.NewRequest(http.MethodDelete, proxySrv.URL+"/mcp", nil)
		req.Header.Set("Mcp-Session-Id", "gone")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if n := strings.Count(logs.String(), "level=WARN msg=\"proxy: the upstream failed several requests in a row"); n != 1 {
		t.Errorf("%d warnings, want the one for 404, 502, 500 (expired sessions are no failure):\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), "proxy: the upstream answers again") {
		t.Errorf("no recovery line:\n%s", logs)
	}
}
