package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// countFDs is the number of file descriptors this process has open.
func countFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd to count file descriptors in: %v", err)
	}
	return len(es)
}

// stressReply is what the stress upstream does with request n.
func stressReply(n int, c net.Conn) bool {
	m := marker(n)
	var err error
	switch n % 8 {
	case 0, 1:
		_, err = io.WriteString(c, ok200(n))
	case 2:
		_, err = io.WriteString(c, chunked(n))
	case 3: // a stale reply after this one: the connection must go
		_, err = io.WriteString(c, ok200(n)+ok200(n))
	case 4:
		_, err = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(m), m)
		return false
	case 5: // in pieces
		s := ok200(n)
		for i := 0; i < len(s) && err == nil; i += 7 {
			_, err = io.WriteString(c, s[i:min(i+7, len(s))])
			time.Sleep(100 * time.Microsecond)
		}
	case 6:
		_, err = io.WriteString(c, strings.Repeat("HTTP/1.1 103 Early Hints\r\n\r\n", 8)+ok200(n))
	case 7: // no answer: the caller gives up
		_, _ = io.Copy(io.Discard, c)
		return false
	}
	return err == nil
}

// TestH1Stress is issue 27 item 11(c): concurrent callers through one lean
// transport to an upstream that mixes well-framed, chunked, split, 1xx,
// closing, stale-reply and never-answering replies, and bodies large
// enough for the fallback transport. Under -race: every caller gets its
// own reply (or its own deadline), and once the transports are idle and
// closed no connection, goroutine or file descriptor is left behind.
func TestH1Stress(t *testing.T) {
	fds0, g0 := countFDs(t), runtime.NumGoroutine()
	// A connection dropped without a Close is closed by its finalizer
	// when a collection finds it: no collection may hide one.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 40
	var (
		mu      sync.Mutex
		conns   = map[net.Conn]bool{}
		serving sync.WaitGroup
		// Every caller's first request is answered once all have
		// arrived: they all end at once, more than the idle pool keeps.
		gathered sync.WaitGroup
	)
	gathered.Add(workers)
	serving.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			serving.Go(func() {
				defer func() {
					c.Close()
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
				}()
				br := bufio.NewReader(c)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					n, _ := strconv.Atoi(r.Header.Get("X-N"))
					if n%each == 0 {
						gathered.Done()
						gathered.Wait()
					}
					if _, err := io.Copy(io.Discard, r.Body); err != nil || !stressReply(n, c) {
						return
					}
				}
			})
		}
	})
	next := &http.Transport{MaxIdleConnsPerHost: 4}
	h1 := newH1Transport(ln.Addr().String(), next, (&net.Dialer{}).DialContext, 2) // fewer idle than callers
	url := "http://" + ln.Addr().String() + "/mcp"

	var callers sync.WaitGroup
	for w := range workers {
		callers.Go(func() {
			for i := range each {
				n := w*each + i
				timeout := 10 * time.Second
				if n%8 == 7 {
					timeout = 20 * time.Millisecond // the upstream never answers
				}
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
				if n%40 == 9 {
					body = strings.Repeat(" ", h1MaxBody+1) + body // over the lean limit
				}
				r, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
				r.Header.Set("X-N", strconv.Itoa(n))
				resp, err := h1.RoundTrip(r)
				var got []byte
				if err == nil {
					got, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				cancel()
				switch {
				case n%8 == 7:
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("request %d, never answered: %v %q, want its deadline", n, err, got)
					}
				case err != nil:
					t.Errorf("request %d: %v", n, err)
				case string(got) != marker(n):
					t.Errorf("request %d got %q, want %q", n, got, marker(n))
				}
			}
		})
	}
	callers.Wait()
	h1.CloseIdleConnections() // and next's
	// Every connection the transports opened is closed now: the upstream
	// sees each end, without a garbage collection closing a lost one.
	open := -1
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		open = len(conns)
		mu.Unlock()
		if open == 0 {
			break
		}
	}
	if open != 0 {
		t.Errorf("%d connections still open from the client's side once its transports were idle and closed", open)
	}
	ln.Close()
	mu.Lock()
	for c := range conns {
		c.Close()
	}
	mu.Unlock()
	serving.Wait()

	var fds, gs int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		fds, gs = countFDs(t), runtime.NumGoroutine()
		if fds <= fds0 && gs <= g0 {
			return
		}
	}
	buf := make([]byte, 1<<20)
	t.Fatalf("after the run: %d file descriptors (%d before), %d goroutines (%d before):\n%s", fds, fds0, gs, g0, buf[:runtime.Stack(buf, true)])
}
