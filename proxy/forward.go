package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// forward sends a checked call to the upstream and relays its answer. It
// returns what settles the call's reservation (Flow.End): nil spends the
// token, an error releases it. A token is released only when the upstream
// provably did not run the call: the request never left the proxy (it
// could not be built, the upstream could not be reached, the transport
// failed before reading any of the body), or the upstream answered with a
// JSON-RPC error, as a handler's error releases its token in the guard.
// Once the request is on its way, anything else (a client hanging up, a
// timeout, a dropped connection, an unreadable, oversized or refused
// answer) leaves the token spent: the upstream may have run the call, and
// the same token must not run it again.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, c *call) error {
	ctx := r.Context()
	if h.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.timeout)
		defer cancel()
	}
	body := c.req.body
	if c.flow.Resumed() || hasAny(c.req.params, "requestState", "inputResponses") {
		// Only a message that changes is rebuilt; its members are unique
		// (parseRequest), so the upstream reads what the proxy read.
		var err error
		if body, err = upstreamBody(c); err != nil {
			return h.fail(w, r, c, "rebuild the upstream request", err, false)
		}
	}
	// Sent under the proxy's own id, fresh for this call (pausable).
	var err error
	if b, ok := withID(body, c.x.sent); ok {
		body = b
	} else {
		rq := *c.req
		rq.body = body
		if rq.msg, err = mcpwire.ParseObject(body); err != nil {
			return h.fail(w, r, c, "rebuild the upstream request", err, false)
		}
		if body, err = requestWithID(&rq, c.x.sent); err != nil {
			return h.fail(w, r, c, "rebuild the upstream request", err, false)
		}
	}
	sent := &sentBody{b: body}
	var up *http.Request
	if h.stdTransport {
		// An *http.Transport writes the headers of a body it does not
		// know to be in memory on their own, ahead of the body (net/http
		// issue 22088): one more write and TCP segment per call. A
		// *bytes.Reader goes out with them in one, and the transport
		// reports the headers written, before any byte of the body
		// (every attempt: a retry is tracked too).
		c.x.trace.WroteHeaders, c.x.trace.GotConn = sent.wrote, c.x.gotConn
		tctx := httptrace.WithClientTrace(ctx, &c.x.trace)
		up, err = http.NewRequestWithContext(tctx, http.MethodPost, "", bytes.NewReader(body))
	} else {
		// A transport of the caller's own may still hand the request to
		// an *http.Transport (the bridge's pass-through does).
		c.x.trace.GotConn = c.x.gotConn
		tctx := httptrace.WithClientTrace(ctx, &c.x.trace)
		up, err = http.NewRequestWithContext(tctx, http.MethodPost, "", sent.reader())
		if err == nil {
			up.ContentLength = int64(len(body))
			up.GetBody = func() (io.ReadCloser, error) { return sent.reader(), nil } // a transport's retry is tracked too
		}
	}
	if err != nil {
		return h.fail(w, r, c, "build the upstream request", err, false)
	}
	// The upstream's URL without printing and parsing it again (target).
	*up.URL = *h.up
	if up.URL.RawQuery == "" {
		up.URL.RawQuery = r.URL.RawQuery
	}
	up.Host = strings.TrimSuffix(h.up.Host, ":") // as NewRequest sets it
	up.Header = h.outHeader(r)
	resp, err := h.tr.RoundTrip(up)
	if err != nil {
		return h.fail(w, r, c, "reach the upstream", err, sent.read.Load())
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// The upstream refused the call itself (a header mismatch, an
		// unknown session, ...): its answer goes to the client as is.
		h.log.WarnContext(ctx, "proxy: upstream answered an HTTP error", "method", c.req.method, "target", mcpwire.Shown(c.target), "status", resp.StatusCode)
		b, _ := io.ReadAll(io.LimitReader(resp.Body, h.maxHeld))
		status := resp.StatusCode
		b, v := h.restoreBody(ctx, c.x, b)
		if v == foreign {
			status = http.StatusOK
		}
		if h.watched {
			code := mrtr.CodeInternalError // an HTTP error without a JSON-RPC one
			if o, c := answerOutcome(b); o == mrtr.OutcomeError {
				code = c
			}
			if err := c.flow.Finish(ctx, mrtr.OutcomeError, code); err != nil {
				writeGuardError(w, c.req.id, err)
				return nil // it may have run the call before failing
			}
		}
		copyHeader(w.Header(), resp.Header)
		w.WriteHeader(status)
		_, _ = w.Write(b)
		if v != foreign && v != nullError && rpcError(b) {
			return errUpstreamRPC
		}
		return nil // it may have run the call before failing (an answer not its own: it may have run it)
	}
	if mcpwire.IsEventStream(resp.Header.Get("Content-Type")) {
		return h.relaySSE(ctx, w, resp, c)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, h.maxHeld+1))
	switch {
	case err != nil:
		return h.fail(w, r, c, "read the upstream response", err, true)
	case int64(len(b)) > h.maxHeld:
		return h.fail(w, r, c, "hold the upstream response", fmt.Errorf("it exceeds the held-message limit of %d bytes", h.maxHeld), true)
	}
	out, status, release := h.finish(ctx, c, b, nil)
	copyHeader(w.Header(), resp.Header, "Content-Type", "application/json", "Content-Length", strconv.Itoa(len(out)))
	if status == 0 {
		status = resp.StatusCode
	}
	w.WriteHeader(status)
	_, _ = w.Write(out)
	return release
}

// sentBody is the body of one upstream request. It records whether a
// transport ever read from it, or (an *http.Transport, through httptrace)
// wrote the request's headers: until then, no byte of the call's body can
// have reached the upstream, which therefore cannot have run it.
type sentBody struct {
	b    []byte
	read atomic.Bool
}

func (s *sentBody) wrote() { s.read.Store(true) }

func (s *sentBody) reader() io.ReadCloser { return &sentReader{s: s, r: bytes.NewReader(s.b)} }

type sentReader struct {
	s *sentBody
	r *bytes.Reader
}

func (sr *sentReader) Read(p []byte) (int, error) {
	sr.s.read.Store(true)
	return sr.r.Read(p)
}

func (sr *sentReader) Close() error { return nil }

// rpcError reports whether b is a JSON-RPC error response.
func rpcError(b []byte) bool {
	resp, err := parseResponse(b, nil)
	return err == nil && resp.result == nil
}

// fail answers a call the upstream did not answer: -32603 with the
// caller's id, and a log line naming the cause. sent tells whether the
// call may have reached the upstream: if not, the message says the call
// was not delivered and fail returns an error (the token is released, the
// same requestState may be sent again); if so, it returns nil (the token
// is spent: the upstream may have run the call).
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, c *call, what string, err error, sent bool) error {
	h.log.ErrorContext(r.Context(), "proxy: upstream failed", "method", c.req.method, "target", mcpwire.Shown(c.target),
		"upstream", shownURL(h.up), "step", what, "sent", sent, "error", err)
	_ = c.flow.Finish(r.Context(), mrtr.OutcomeError, mrtr.CodeInternalError) // the answer is an error already
	if sent {
		writeError(w, http.StatusOK, c.req.id, mrtr.CodeInternalError, msgFailedAfterSend, nil)
		return nil
	}
	writeError(w, http.StatusOK, c.req.id, mrtr.CodeInternalError, msgNotDelivered, nil)
	return fmt.Errorf("proxy: %s: %w", what, err)
}

// The messages of the proxy's -32603 answers to a call the upstream did
// not answer, which tell a client whether it may send the same
// requestState again.
const (
	// msgNotDelivered: the call never reached the upstream; a reserved
	// token was released.
	msgNotDelivered = "upstream unavailable: the call was not delivered"
	// msgFailedAfterSend: the call was sent and the upstream may have run
	// it; a reserved token stays spent (a retry with it is replayed).
	msgFailedAfterSend = "upstream failed after the call was sent"
)
