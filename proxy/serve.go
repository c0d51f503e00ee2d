package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/task"
)

// ServeHTTP proxies one request. See the package documentation.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.hostOK(r) {
		return403(w)
		return
	}
	switch r.Method {
	case http.MethodPost:
	case http.MethodGet, http.MethodHead, http.MethodDelete, http.MethodOptions:
		// GET streams and DELETE of 2025-11-25 sessions, HEAD, CORS
		// preflights: as is, streamed, and without a body, which none of
		// them has a use for and which the proxy would not read.
		if r.ContentLength != 0 {
			writeError(w, http.StatusBadRequest, nil, mcpwire.CodeInvalidRequest, "invalid request: a "+r.Method+" request has no body", nil)
			return
		}
		if r = h.withCaller(w, r, nil); r != nil {
			h.rp.ServeHTTP(w, r)
		}
		return
	default:
		// PUT, PATCH and the rest are no MCP request: refused, never
		// forwarded unread.
		w.Header().Set("Allow", allowedMethods)
		writeError(w, http.StatusMethodNotAllowed, nil, mcpwire.CodeInvalidRequest, "method not allowed", nil)
		return
	}
	body, err := readBody(http.MaxBytesReader(w, r.Body, h.maxBody), r.ContentLength, h.maxBody)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, nil, mcpwire.CodeInvalidRequest, "request body too large", nil)
			return
		}
		writeError(w, http.StatusBadRequest, nil, mcpwire.CodeParseError, "parse error: unreadable body", nil)
		return
	}
	req, err := parseRequest(body)
	var folded *foldedNameError
	switch {
	case errors.Is(err, mcpwire.ErrDuplicateName):
		writeError(w, http.StatusBadRequest, nil, mcpwire.CodeInvalidRequest, "invalid request: a member name repeats", nil)
		return
	case errors.As(err, &folded):
		writeError(w, http.StatusBadRequest, folded.id, mcpwire.CodeInvalidRequest, "invalid request: a "+folded.Error(), nil)
		return
	case errors.Is(err, errBadRequest) || errors.Is(err, mcpwire.ErrNotObject):
		writeError(w, http.StatusBadRequest, nil, mcpwire.CodeInvalidRequest, "invalid request: one JSON-RPC object expected (no batches)", nil)
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, nil, mcpwire.CodeParseError, "parse error", nil)
		return
	}
	if name, mismatch := headerMismatch(r.Header, req); mismatch {
		// A token is bound to the body, and the proxy judges every
		// message by its body; an upstream that routed on a header naming
		// something else would run what the proxy did not check. The
		// spec's answer to a mismatch is -32020 (400).
		h.log.WarnContext(r.Context(), "proxy: a request header disagrees with its body", "header", name, "method", logValue(req.method))
		writeError(w, http.StatusBadRequest, req.id, mcpwire.CodeHeaderMismatch, "header mismatch: "+name+" does not match the request body", nil)
		return
	}
	if task.IsMethod(req.method) && req.id == nil {
		// A task is named only by a request the proxy checks and answers.
		writeError(w, http.StatusBadRequest, nil, mcpwire.CodeInvalidRequest, "invalid request: "+req.method+" must be a request with an id", nil)
		return
	}
	if mcpwire.Pausable(req.method) {
		if req.id == nil {
			writeError(w, http.StatusBadRequest, nil, mcpwire.CodeInvalidRequest, "invalid request: "+req.method+" must be a request with an id", nil)
			return
		}
		h.pausable(w, r, req)
		return
	}
	principal, err := h.principal(r)
	if err != nil {
		writeError(w, http.StatusUnauthorized, req.id, mcpwire.CodeInvalidRequest, "unauthorized", nil)
		return
	}
	out := req.body
	ctx := context.WithValue(r.Context(), idKey{}, req)
	key := cancelKey{who: principal, session: r.Header.Get("Mcp-Session-Id")}
	switch {
	case req.id != nil && req.method != "":
		// A request: sent under the proxy's own id (ids.go), a client's
		// response to a server's request passes as it is.
		var swap *taskSwap
		if task.IsMethod(req.method) {
			// A task's request reaches the upstream only naming a task of
			// this caller's, by the upstream's own id (tasks.go).
			var ok bool
			if req.body, swap, ok = h.taskRequest(w, r, req, principal); !ok {
				return
			}
		}
		var names map[string]json.RawMessage
		if req.method == methodListen {
			// The tasks it asks to hear of, by the upstream's ids.
			var ok bool
			if req.body, names, ok = h.listenTasks(req, principal); !ok {
				writeError(w, http.StatusBadRequest, req.id, mcpwire.CodeInvalidRequest, "invalid request", nil)
				return
			}
		}
		x := h.newExchange(req.id, req.method)
		x.task, x.tasks, x.who = swap, names, principal
		if out, err = requestWithID(req, x.sent); err != nil {
			writeError(w, http.StatusBadRequest, req.id, mcpwire.CodeInvalidRequest, "invalid request", nil)
			return
		}
		req.x = x
		key.id = string(req.id)
		if !h.live.add(key, x.sent) {
			writeError(w, http.StatusOK, req.id, mcpwire.CodeInvalidRequest, msgIDInUse, nil)
			return
		}
		defer h.live.remove(key, x.sent)
		x.trace.GotConn = x.gotConn
		ctx = httptrace.WithClientTrace(ctx, &x.trace)
	case req.method == methodCancelled:
		var ok bool
		if out, ok = h.cancelled(key, req); !ok {
			// No request of this caller's is in flight under that id: there
			// is nothing to cancel, and the notification must not reach a
			// request of another's.
			w.WriteHeader(http.StatusAccepted)
			return
		}
	}
	if h.timeout > 0 && req.method != methodListen && req.id != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.timeout)
		defer cancel()
	}
	r2 := r.Clone(bridge.WithCaller(ctx, principal))
	if req.x != nil && req.x.task != nil {
		// The extension's routing header names the task as the body does.
		r2.Header.Set("Mcp-Name", headerSafe(req.x.task.upstream))
	}
	r2.Body = io.NopCloser(bytes.NewReader(out))
	r2.ContentLength = int64(len(out))
	r2.GetBody = nil
	h.rp.ServeHTTP(w, r2)
}

// readBody is io.ReadAll of a body whose length the client declared (n,
// -1 when unknown), in one allocation when it is within max: the buffer
// starts one byte larger than declared, room for the read that finds the
// end.
func readBody(r io.Reader, n, max int64) ([]byte, error) {
	if n < 0 || n > max {
		n = 511 // io.ReadAll's start
	}
	b := make([]byte, 0, n+1)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// withCaller returns r with its caller (Options.Principal) in the context,
// for a transport that serves callers separately (the bridge: sessions and
// 2025-11-25 session ids are never shared between callers), or nil after
// answering 401 when the principal cannot be had.
func (h *Handler) withCaller(w http.ResponseWriter, r *http.Request, id json.RawMessage) *http.Request {
	p, err := h.principal(r)
	if err != nil {
		writeError(w, http.StatusUnauthorized, id, mcpwire.CodeInvalidRequest, "unauthorized", nil)
		return nil
	}
	return r.WithContext(bridge.WithCaller(r.Context(), p))
}

type idKey struct{}

// rewrite points a passed-through request at the upstream.
func (h *Handler) rewrite(pr *httputil.ProxyRequest) {
	pr.Out.URL = h.target(pr.In.URL)
	pr.Out.Host = ""
	if req, _ := pr.In.Context().Value(idKey{}).(*rpcRequest); req != nil && req.x != nil {
		// The answer is read to check its id: in plain bytes, which the
		// transport negotiates and decodes itself.
		pr.Out.Header.Del("Accept-Encoding")
	}
	setForwarded(pr.Out.Header, pr.In)
	if !h.fwdAuth {
		pr.Out.Header.Del("Authorization")
	}
}

func (h *Handler) target(in *url.URL) *url.URL {
	u := *h.up
	if u.RawQuery == "" && in != nil {
		u.RawQuery = in.RawQuery
	}
	return &u
}

// passThroughFailed answers a request the upstream did not answer.
func (h *Handler) passThroughFailed(w http.ResponseWriter, r *http.Request, err error) {
	req, _ := r.Context().Value(idKey{}).(*rpcRequest)
	method := r.Method
	if req != nil && req.method != "" {
		method = req.method
	}
	h.log.ErrorContext(r.Context(), "proxy: upstream failed", "method", method, "upstream", shownURL(h.up), "error", err)
	if req == nil || req.id == nil {
		http.Error(w, "upstream unavailable", http.StatusBadGateway)
		return
	}
	writeError(w, http.StatusOK, req.id, mrtr.CodeInternalError, "upstream unavailable", nil)
}
