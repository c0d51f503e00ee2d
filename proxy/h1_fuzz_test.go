package proxy

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// FuzzH1Reuse is issue 27 item 11(b): the lean transport reusing its
// connections over real TCP. Each run sends three requests in turn to an
// upstream that writes its reply to each in two pieces, split at a fuzzed
// offset with a fuzzed pause between, framed by Content-Length or chunked,
// and follows it with fuzzed bytes: in the same write as the reply's end,
// or (late) once the client has read the reply, on the idle connection.
// Invariant: request n+1 never receives bytes of reply n or of what
// followed it; each request gets exactly its own reply (marked with a
// nonce the fuzzer cannot forge), and a connection is reused exactly when
// nothing followed a reply.
func FuzzH1Reuse(f *testing.F) {
	stale := []byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale")
	f.Add(uint16(0), uint8(0), false, false, []byte(nil))
	f.Add(uint16(17), uint8(2), false, false, stale)
	f.Add(uint16(40), uint8(1), true, false, []byte("garbage"))
	f.Add(uint16(3), uint8(3), false, true, stale)
	f.Add(uint16(60), uint8(0), true, true, []byte("\r\n"))
	f.Add(uint16(38), uint8(1), false, false, []byte("H"))
	f.Add(uint16(1), uint8(0), true, false, []byte("HTTP/1.1 100 Continue\r\n\r\n"))
	f.Fuzz(func(t *testing.T, split uint16, pause uint8, chunkedReply, late bool, extra []byte) {
		if len(extra) > 512 {
			return
		}
		const requests = 3
		nonce := rand.Text()[:10]
		body := func(n int) string { return "reply-" + nonce + "-" + strconv.Itoa(n) + "." }
		reply := func(n int) string {
			b := body(n)
			if chunkedReply {
				return fmt.Sprintf("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(b), b)
			}
			return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
		}
		var read, settled [requests]chan struct{}
		for i := range requests {
			read[i], settled[i] = make(chan struct{}), make(chan struct{})
		}
		conns := new(atomic.Int32)
		url := serveConns(t, "/mcp", func(c net.Conn) {
			defer c.Close()
			conns.Add(1)
			br := bufio.NewReader(c)
			for {
				r, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				n, err := strconv.Atoi(r.Header.Get("X-N"))
				if err != nil || n < 0 || n >= requests {
					return
				}
				if _, err := io.Copy(io.Discard, r.Body); err != nil {
					return
				}
				s := reply(n)
				at := int(split) % len(s) // the second piece holds the reply's last byte
				if _, err := io.WriteString(c, s[:at]); err != nil {
					return
				}
				time.Sleep(time.Duration(pause%4) * time.Millisecond)
				tail := s[at:]
				if !late {
					tail += string(extra)
				}
				if _, err := io.WriteString(c, tail); err != nil {
					return
				}
				if late && len(extra) > 0 {
					select {
					case <-read[n]:
					case <-time.After(10 * time.Second):
						return
					}
					if _, err := c.Write(extra); err != nil {
						return
					}
				}
				close(settled[n])
			}
		})
		h1, u := testH1(t, url, nil)
		for n := range requests {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			r := postTo(t, ctx, u, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			r.Header.Set("X-N", strconv.Itoa(n))
			resp, err := h1.RoundTrip(r)
			if err != nil {
				cancel()
				t.Fatalf("request %d: %v", n, err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			cancel()
			if err != nil || resp.StatusCode != 200 || string(b) != body(n) {
				t.Fatalf("request %d got %d %q (%v), want its own reply %q", n, resp.StatusCode, b, err, body(n))
			}
			close(read[n])
			select {
			case <-settled[n]:
			case <-time.After(10 * time.Second):
				t.Fatalf("the upstream did not settle request %d", n)
			}
		}
		want := int32(1)
		if len(extra) > 0 {
			want = requests
		}
		if got := conns.Load(); got != want {
			t.Fatalf("%d requests took %d connections, want %d (bytes after each reply: %d)", requests, got, want, len(extra))
		}
	})
}
