//go:build unix

package bridge_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/internal/stdio"
)

// procPatience bounds the wait for a child to be stopped: exceeding it
// fails the test, naming the child; a correct run takes about two of the
// children's 100 ms grace periods.
const procPatience = 15 * time.Second

// procInitAnswer is a 2025-11-25 server's answer to the first request of a
// connection (id 1).
const procInitAnswer = `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"sh","version":"1"}}}`

// closingChildren dials shell children that answer initialize (when
// answer is set), read lines more messages, then close their stdout and
// sleep: alive, with nothing more to say.
type closingChildren struct {
	answer bool
	lines  int
	mu     sync.Mutex
	kids   []*stdio.Child
}

func (d *closingChildren) dial(context.Context) (bridge.Upstream, error) {
	script := `read -r l; `
	if d.answer {
		script += `printf '%s\n' "$INIT"; `
	}
	for range d.lines {
		script += `read -r l; `
	}
	script += `exec 1>&-; exec sleep 600`
	ch, err := stdio.Start(stdio.Config{Path: "/bin/sh", Args: []string{"-c", script}, Env: []string{"INIT=" + procInitAnswer}, StopGrace: 100 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.kids = append(d.kids, ch)
	d.mu.Unlock()
	return childUpstream{ch}, nil
}

// wantStopped fails t unless at least want children started and every
// one has been stopped and reaped; any still running is killed.
func (d *closingChildren) wantStopped(t *testing.T, want int) {
	t.Helper()
	d.mu.Lock()
	kids := append([]*stdio.Child(nil), d.kids...)
	d.mu.Unlock()
	if len(kids) < want {
		t.Errorf("%d children started, want at least %d", len(kids), want)
	}
	deadline := time.After(procPatience)
	for _, ch := range kids {
		select {
		case <-ch.Done():
		case <-deadline:
			for _, k := range kids {
				syscall.Kill(-k.Pid(), syscall.SIGKILL)
			}
			t.Fatalf("child %d closed its stdout and still runs %v later: never stopped", ch.Pid(), procPatience)
		}
	}
}

func roundTrip(t *testing.T, rt http.RoundTripper, hdr http.Header, body string) {
	t.Helper()
	r, _ := http.NewRequest(http.MethodPost, "http://stdio.upstream/mcp", bytes.NewReader([]byte(body)))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		r.Header[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), procPatience)
	defer cancel()
	resp, err := rt.RoundTrip(r.WithContext(ctx))
	if err != nil {
		return // refused: fine, the child is what is checked
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

const procModernCall = `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"x","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`

var modernHeader = http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"x"}}

// TestClosedStdoutChildStopped: a child that closes its stdout and stays
// alive is stopped, behind a Bridge (a session per call), a Direct (the
// shared child) and a 2025-11-25 client's session alike. Reproduced with
// --max-procs 2: five calls left five live children (issue 27, item 4);
// here the pool has room for all, so no outcome depends on how soon a
// gone session's slot is free.
func TestClosedStdoutChildStopped(t *testing.T) {
	t.Run("bridge", func(t *testing.T) {
		d := &closingChildren{answer: true, lines: 2}
		// Room for all five: whether a gone session's slot is free by
		// the next call is not what this checks.
		b := bridge.New(bridge.Options{Dial: d.dial, MaxSessions: 5})
		t.Cleanup(func() { b.Close(context.Background()) })
		for range 5 {
			roundTrip(t, b, modernHeader, procModernCall)
		}
		d.wantStopped(t, 5)
	})
	t.Run("direct", func(t *testing.T) {
		d := &closingChildren{lines: 0}
		dr := bridge.NewDirectWith(bridge.DirectOptions{Dial: d.dial, MaxProcs: 2})
		t.Cleanup(func() { dr.Close(context.Background()) })
		roundTrip(t, dr, modernHeader, procModernCall)
		d.wantStopped(t, 1)
	})
	t.Run("legacy client session", func(t *testing.T) {
		d := &closingChildren{answer: true}
		b := bridge.New(bridge.Options{Dial: d.dial, MaxSessions: 3})
		t.Cleanup(func() { b.Close(context.Background()) })
		for range 3 {
			roundTrip(t, b, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
		}
		d.wantStopped(t, 3)
	})
}
