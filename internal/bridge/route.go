package bridge

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/internal/rpc"
)

// RoundTrip serves one request as a 2026-07-28 server would, or passes it
// to Options.Passthrough.
func (b *Bridge) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.o.Passthrough != nil && r.Method != http.MethodPost {
		return b.o.Passthrough.RoundTrip(r)
	}
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if b.o.Passthrough != nil && !modernRequest(r, body) {
		if !b.o.RootsFromClient {
			body = withoutRootsCapability(body)
		}
		out := r.Clone(r.Context())
		out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		return b.o.Passthrough.RoundTrip(out)
	}
	if v := r.Header.Get("Authorization"); v != "" {
		r = r.WithContext(withAuthorization(r.Context(), v))
	}
	return serveInProcess(r, body, b.serve), nil
}

// readBody reads and closes a request's body (the proxy has capped it
// already; this bound only keeps a caller that did not from growing
// without limit).
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	defer r.Body.Close()
	return io.ReadAll(io.LimitReader(r.Body, 64<<20))
}

// serveInProcess runs serve for r as an HTTP handler would, and returns
// the response as soon as serve writes its header: what it writes after
// streams to the response's body.
func serveInProcess(r *http.Request, body []byte, serve func(context.Context, *pipeWriter, *http.Request, []byte)) *http.Response {
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan *http.Response, 1), body: pr, req: r}
	go func() {
		serve(r.Context(), w, r, body)
		w.WriteHeader(http.StatusOK)
		pw.Close()
	}()
	return <-w.ready
}

// modernRequest reports whether a POST is a 2026-07-28 request (see
// Options.Passthrough).
func modernRequest(r *http.Request, body []byte) bool {
	if r.Header.Get("Mcp-Session-Id") != "" {
		return false
	}
	if r.Header.Get("Mcp-Protocol-Version") == ModernVersion {
		return true
	}
	m, err := rpc.Parse(body)
	if err != nil || len(m.Params) == 0 || m.Params[0] != '{' {
		return false
	}
	v, _ := mcpwire.Member(mcpwire.SplitObject(mcpwire.TrimSpace(m.Params))["_meta"], mcpwire.MetaProtocolVersion)
	return len(v) > 0
}

// pipeWriter is the http.ResponseWriter of a request served in process:
// what the handler writes streams to the response's body.
type pipeWriter struct {
	header http.Header
	pw     *io.PipeWriter
	body   io.ReadCloser
	req    *http.Request
	once   sync.Once
	ready  chan *http.Response
}

func (p *pipeWriter) Header() http.Header { return p.header }

func (p *pipeWriter) WriteHeader(code int) {
	p.once.Do(func() {
		p.ready <- &http.Response{
			Status: strconv.Itoa(code) + " " + http.StatusText(code), StatusCode: code,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: p.header.Clone(), Body: p.body, ContentLength: -1, Request: p.req,
		}
	})
}

func (p *pipeWriter) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return p.pw.Write(b)
}

func (p *pipeWriter) Flush() {}

// legacyRequest reports whether r (its body) belongs to a 2025-11-25
// session rather than to the 2026-07-28 wire: a GET or DELETE, anything
// carrying a session id, and initialize, which 2026-07-28 does not have.
func legacyRequest(r *http.Request, body []byte) bool {
	if r.Method != http.MethodPost || r.Header.Get(sessionHeader) != "" {
		return true
	}
	m, err := rpc.Parse(body)
	if err != nil || m.Method != "initialize" {
		return false
	}
	// An initialize carrying the 2026-07-28 _meta is a modern client's
	// call of a method 2026-07-28 removed: the modern path answers it
	// (-32601, 404), as an HTTP server does.
	v, _ := mcpwire.Member(mcpwire.TrimSpace(m.Params), "_meta")
	pv, _ := mcpwire.Member(v, mcpwire.MetaProtocolVersion)
	return len(pv) == 0
}
