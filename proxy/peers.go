package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// Defaults of Peers.
const (
	// DefaultPeerDialTimeout bounds connecting to the replica holding a
	// call: a holder that cannot be reached is an error at once.
	DefaultPeerDialTimeout = 2 * time.Second
	// DefaultPeerCheckEvery is how often a forwarded resume asks Locate
	// again whether its holder is still there.
	DefaultPeerCheckEvery = 3 * time.Second
)

// ForwardedHeader marks a resume one replica forwarded to another. A
// request carrying it is served where it arrives, never forwarded again,
// whatever the directory says (no loops); a client that sets it only loses
// the forwarding. Its value is the forwarding replica's Peers.Node (or 1).
const ForwardedHeader = "Mrtr-Forwarded"

// ErrHolderGone is what Peers.Locate returns (wrapped or not) for a call
// whose holder is not there any more: it stopped, was killed or is frozen.
// The client is told to start the call over.
var ErrHolderGone = errors.New("proxy: the replica holding the paused call is gone")

// Peers lets replicas of a proxy whose upstream holds paused calls in
// process (the bridge of a 2025-11-25 upstream) serve each other's
// resumes. A resume is checked first by Guard, with every check but
// single use; Locate then names the replica that holds its call, and the
// client's request goes there as received (body, Authorization, Accept,
// Content-Type and Mcp-* headers; the replicas are one resource server,
// the token's audience, so this is no token passthrough), its answer
// streamed back. The holder checks it again with its full guard, single
// use included; the forwarding replica reserves nothing.
type Peers struct {
	// Guard checks a resume before it is forwarded: the same codec and
	// policy as Options.Guard (key ring, server id, TTLs, rounds) but no
	// Store, so that a tampered, expired, moved or other caller's token is
	// refused where it arrives. A Guard with a Store panics in New.
	Guard *mrtr.Guard
	// Locate returns the URL of the replica holding the call whose
	// upstream requestState is given: nil when it is held here or the
	// state is not one a replica holds (the call is served here);
	// ErrHolderGone when its holder is not there any more. Any other
	// error means it cannot tell (its directory is unavailable): the
	// resume is refused with -32603 and its token stays unused.
	Locate func(ctx context.Context, upstreamState string) (*url.URL, error)
	// Transport reaches the other replicas. Nil means a transport that
	// dials within DialTimeout and ignores proxy environment variables.
	Transport http.RoundTripper
	// DialTimeout bounds connecting to a replica when Transport is nil.
	// Zero means DefaultPeerDialTimeout.
	DialTimeout time.Duration
	// CheckEvery is how often Locate is asked again while a forwarded
	// resume waits for its answer: once it says ErrHolderGone (a holder
	// frozen or killed mid-call drops out of the directory), the resume
	// ends with an error instead of waiting on. Zero means
	// DefaultPeerCheckEvery.
	CheckEvery time.Duration
	// Node names this replica in the ForwardedHeader of the resumes it
	// forwards, so that the holder can record who forwarded them; it is
	// sent only when it consists of letters, digits, '-' and '_' (else
	// "1", as when empty).
	Node string
	// Gone, if set, is called with the request's context when this replica
	// answers a resume that the guard accepted with the "start over" error
	// because its holder is gone (not in the directory, not reachable, or
	// gone while the resume waited), so that the refusal can be recorded.
	Gone func(ctx context.Context)
}

// peers is Peers with its defaults filled in.
type peers struct {
	guard  *mrtr.Guard
	locate func(context.Context, string) (*url.URL, error)
	tr     http.RoundTripper
	every  time.Duration
	node   string // the ForwardedHeader's value
	gone   func(context.Context)
}

func newPeers(p *Peers) *peers {
	if p.Guard == nil || p.Locate == nil {
		panic("proxy: Options.Peers needs a Guard and a Locate")
	}
	if p.Guard.Policy().Store != nil {
		panic("proxy: Options.Peers.Guard must have no Store (the holder reserves the token, not the replica forwarding it)")
	}
	ps := &peers{guard: p.Guard, locate: p.Locate, tr: p.Transport, every: p.CheckEvery, node: "1", gone: p.Gone}
	if p.Node != "" && strings.Trim(p.Node, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") == "" {
		ps.node = p.Node
	}
	if ps.gone == nil {
		ps.gone = func(context.Context) {}
	}
	if ps.every <= 0 {
		ps.every = DefaultPeerCheckEvery
	}
	if ps.tr == nil {
		dial := p.DialTimeout
		if dial <= 0 {
			dial = DefaultPeerDialTimeout
		}
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil // replicas talk directly
		t.DialContext = (&net.Dialer{Timeout: dial, KeepAlive: 30 * time.Second}).DialContext
		ps.tr = t
	}
	return ps
}

// The messages of the -32603 answers to a resume whose holder is
// elsewhere.
const (
	// msgHolderGone: in the wording of the bridge's own "gone" answer.
	msgHolderGone = "the paused call is gone (the proxy holding it stopped or cannot be reached): start the call over"
	// msgNoDirectory: the token was not reserved; the same requestState
	// may be sent again.
	msgNoDirectory = "the proxy cannot tell which replica holds the paused call right now: try again"
)

// routed sends a resume held by another replica there. It reports whether
// it answered the request; if not, the request is served here, as without
// Peers.
func (h *Handler) routed(w http.ResponseWriter, r *http.Request, req *rpcRequest, mreq *mrtr.Request) bool {
	if r.Header.Get(ForwardedHeader) != "" {
		return false // forwarded once already: served here, whatever the directory says
	}
	ctx := r.Context()
	fl, err := h.peers.guard.Begin(ctx, mreq)
	if err != nil {
		writeGuardError(w, req.id, err)
		return true
	}
	_ = fl.End(ctx, nil) // no store: nothing to settle
	var cont json.RawMessage
	if fl.Continuation(&cont) != nil {
		return false
	}
	s, ok := mcpwire.Member(mcpwire.TrimSpace(cont), "s")
	var state string
	if !ok || json.Unmarshal(s, &state) != nil {
		return false
	}
	holder, err := h.peers.locate(ctx, state)
	switch {
	case errors.Is(err, ErrHolderGone):
		h.log.InfoContext(ctx, "proxy: the replica holding a paused call is gone", "method", req.method, "target", mcpwire.Shown(mreq.Target))
		h.peers.gone(ctx)
		writeError(w, http.StatusOK, req.id, mrtr.CodeInternalError, msgHolderGone, nil)
		return true
	case err != nil:
		h.log.ErrorContext(ctx, "proxy: cannot locate the replica holding a paused call", "method", req.method, "target", mcpwire.Shown(mreq.Target), "error", err)
		writeError(w, http.StatusOK, req.id, mrtr.CodeInternalError, msgNoDirectory, nil)
		return true
	case holder == nil:
		return false
	}
	h.toPeer(w, r, req, mreq.Target, state, holder)
	return true
}

// toPeer forwards a resume to the replica holding its call and streams
// the answer back.
func (h *Handler) toPeer(w http.ResponseWriter, r *http.Request, req *rpcRequest, target, state string, holder *url.URL) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	if h.timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, h.timeout)
		defer stop()
	}
	go h.watchHolder(ctx, cancel, state)
	out, err := http.NewRequestWithContext(ctx, http.MethodPost, holder.String(), bytes.NewReader(req.body))
	if err != nil {
		h.log.ErrorContext(ctx, "proxy: build the request to the replica holding a paused call", "error", err)
		h.peers.gone(r.Context())
		writeError(w, http.StatusOK, req.id, mrtr.CodeInternalError, msgHolderGone, nil)
		return
	}
	out.ContentLength = int64(len(req.body))
	out.Header = peerHeader(r, h.peers.node)
	resp, err := h.peers.tr.RoundTrip(out)
	if err != nil {
		if c := context.Cause(ctx); c != nil {
			err = c
		}
		h.log.WarnContext(ctx, "proxy: the replica holding a paused call did not answer", "method", req.method, "target", mcpwire.Shown(target),
			"holder", holder.Redacted(), "error", err)
		h.peers.gone(r.Context())
		writeError(w, http.StatusOK, req.id, mrtr.CodeInternalError, msgHolderGone, nil)
		return
	}
	defer resp.Body.Close()
	copyHeader(w.Header(), resp.Header)
	if resp.ContentLength >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return // the client went away
			}
			_ = rc.Flush()
		}
		if err != nil {
			if err != io.EOF {
				if c := context.Cause(ctx); c != nil {
					err = c
				}
				h.log.WarnContext(ctx, "proxy: the answer of the replica holding a paused call broke off", "method", req.method, "target", mcpwire.Shown(target),
					"holder", holder.Redacted(), "error", err)
			}
			return
		}
	}
}

// watchHolder ends a forwarded resume (cancel with ErrHolderGone) once
// Locate says its holder is gone, until ctx ends. Other errors of Locate
// (a directory briefly unavailable) let it wait on.
func (h *Handler) watchHolder(ctx context.Context, cancel context.CancelCauseFunc, state string) {
	t := time.NewTicker(h.peers.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := h.peers.locate(ctx, state); errors.Is(err, ErrHolderGone) {
				cancel(ErrHolderGone)
				return
			}
		}
	}
}

// peerHeader is the header of a resume forwarded to its holder: the
// client's Authorization, Accept, Content-Type, Mcp-* and trace context
// fields, the proxy's forwarding headers (setForwarded), and
// ForwardedHeader (naming node).
func peerHeader(r *http.Request, node string) http.Header {
	out := http.Header{}
	for k, vs := range r.Header {
		switch ck := http.CanonicalHeaderKey(k); {
		case ck == "Authorization", ck == "Accept", ck == "Content-Type", ck == "Traceparent", ck == "Tracestate", ck == "User-Agent",
			strings.HasPrefix(ck, "Mcp-"):
			out[ck] = append([]string(nil), vs...)
		}
	}
	setForwarded(out, r)
	out.Set(ForwardedHeader, node)
	return out
}
