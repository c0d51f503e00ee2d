package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// flushDelay is how long the proxy holds a response's first bytes (its
// header, or an event not yet flushed) before it flushes them anyway: a
// short call leaves in one write, a long-running one shows its header and
// every event soon.
const flushDelay = 50 * time.Millisecond

// sseWriter writes one relayed event stream to the client, coalesced: the
// header goes out with the first event, not alone; an event that is not
// the response is flushed at once (the client is waiting for it); the
// response is left for the end of the handler to send with the stream's
// end. A timer flushes whatever waits after flushDelay, so nothing is
// held long: the header of a call that runs long, the response of a
// stream the upstream does not close. Safe for the timer's goroutine and
// the handler's.
type sseWriter struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	status  int
	started bool // the header is written
	dirty   bool // bytes wait for a flush
	armed   bool // the timer will fire
	done    bool
	delay   time.Duration
	timer   *time.Timer
}

func newSSEWriter(w http.ResponseWriter, status int, delay time.Duration) *sseWriter {
	s := &sseWriter{w: w, rc: http.NewResponseController(w), status: status, dirty: true, armed: true, delay: delay}
	s.timer = time.AfterFunc(delay, s.tick)
	return s
}

func (s *sseWriter) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = false
	if s.done || !s.dirty {
		return
	}
	s.startLocked()
	_ = s.rc.Flush()
	s.dirty = false
}

func (s *sseWriter) startLocked() {
	if !s.started {
		s.started = true
		s.w.WriteHeader(s.status)
	}
}

// write writes b and flushes it now, or within flushDelay when now is
// false.
func (s *sseWriter) write(b []byte, now bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.startLocked()
	_, err := s.w.Write(b)
	if err != nil {
		return err
	}
	if now {
		s.dirty = false
		return s.rc.Flush()
	}
	s.dirty = true
	if !s.armed {
		s.armed = true
		s.timer.Reset(s.delay)
	}
	return nil
}

// asJSON answers with b as a JSON response of the given status instead
// of the stream, if nothing of the stream has been written yet.
func (s *sseWriter) asJSON(status int, b []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return false
	}
	s.started = true
	h := s.w.Header()
	h.Del("X-Accel-Buffering")
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	s.w.WriteHeader(status)
	_, _ = s.w.Write(b)
	return true
}

// close ends the writer's use of w (the handler returns next, and
// net/http sends what waits with the stream's end).
func (s *sseWriter) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
	s.timer.Stop()
	s.startLocked()
}

// relaySSE relays the upstream's per-request event stream event by event
// and rewrites only the final response. Events before it are flushed as
// they arrive; the header and the response are coalesced with them (see
// sseWriter). It returns what settles the reservation (see forward): the
// stream is the upstream's answer, so only a final JSON-RPC error
// releases it; a stream that breaks or ends before the response, or a
// client that hangs up, leaves it spent.
func (h *Handler) relaySSE(ctx context.Context, w http.ResponseWriter, resp *http.Response, c *call) error {
	copyHeader(w.Header(), resp.Header, "X-Accel-Buffering", "no")
	sw := newSSEWriter(w, resp.StatusCode, h.flushDelay)
	defer sw.close()
	er := mcpwire.NewEventReader(resp.Body, int(min(h.maxHeld, math.MaxInt)))
	defer er.Close()
	var release error
	final := false
	for {
		ev, err := er.Next()
		if err != nil {
			if !final {
				if errors.Is(err, io.EOF) {
					err = errNoResponse
				}
				h.log.ErrorContext(ctx, "proxy: upstream failed", "method", c.req.method, "target", mcpwire.Shown(c.target),
					"upstream", shownURL(h.up), "step", "read the upstream event stream", "sent", true, "error", err)
				_ = sw.write(mcpwire.AppendEvent(nil, nil, errorBody(c.req.id, mrtr.CodeInternalError, msgFailedAfterSend, nil)), false)
			}
			return release
		}
		if d := mcpwire.TrimSpace(ev.Data); len(d) > 0 {
			msg, err := mcpwire.ParseObject(d)
			resp := err == nil && isResponse(msg)
			if d[0] == '[' || (resp && final) {
				// A batch, or a second response: not this request's, never
				// relayed. The stream ends here, its connection closed.
				c.x.discard()
				h.log.ErrorContext(ctx, "proxy: upstream failed", "method", c.req.method, "target", mcpwire.Shown(c.target),
					"upstream", h.up.Redacted(), "step", "read the upstream event stream", "sent", true, "error", errForeign)
				if !final {
					_ = sw.write(mcpwire.AppendEvent(nil, nil, errorBody(c.req.id, mrtr.CodeInternalError, msgForeign, nil)), false)
				}
				return release
			}
			if !resp && err == nil && namesTasks(d) {
				out, keep := h.sealNotice(d, msg, c.who)
				if !keep {
					continue
				}
				if len(out) != len(d) || &out[0] != &d[0] {
					if err := sw.write(mcpwire.AppendEvent(nil, ev.Other, out), true); err != nil {
						return release
					}
					continue
				}
			}
			if resp {
				out, status, r := h.finish(ctx, c, ev.Data, msg)
				release, final = r, true
				if c.refused {
					// Another request's response: the stream ends with the
					// proxy's error in its place.
					_ = sw.write(mcpwire.AppendEvent(nil, nil, out), false)
					return release
				}
				if status != 0 && status != http.StatusOK && sw.asJSON(status, out) {
					// An answer with its own HTTP status (-32021 is 400 on the
					// 2026-07-28 wire) before anything of the stream left: sent
					// as a JSON response, as the upstream would have.
					return release
				}
				_ = sw.write(mcpwire.AppendEvent(nil, ev.Other, out), false)
				continue
			}
		}
		raw := ev.Raw
		if !bytes.HasSuffix(raw, []byte("\n\n")) && !bytes.HasSuffix(raw, []byte("\r\n\r\n")) {
			raw = append(raw[:len(raw):len(raw)], "\n\n"...)
		}
		if err := sw.write(raw, true); err != nil {
			return release // the client hung up; the upstream has the call
		}
	}
}
