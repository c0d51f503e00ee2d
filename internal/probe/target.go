package probe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/mrtr-go/mrtr/internal/termtext"
)

// Caller says whose credentials a request carries.
type Caller int

const (
	// Primary is the caller every pause is made as.
	Primary Caller = iota
	// Other is a second caller, for the another_caller check.
	Other
)

// Request is one JSON-RPC request to a target.
type Request struct {
	ID     int64
	Method string
	// Name is the tool or prompt name (or resource URI) of the request,
	// for transports that repeat it outside the body (Mcp-Name).
	Name string
	// Version is the protocol version the request speaks.
	Version string
	// Params is the request's params object.
	Params json.RawMessage
}

// Reply is what a target answered to one Request.
type Reply struct {
	// Status is the HTTP status (0 on transports without one).
	Status int
	// Message is the JSON-RPC response to the request, nil when none came.
	Message json.RawMessage
	// Session is the session id a legacy server assigned (HTTP
	// Mcp-Session-Id), if any.
	Session string
}

// Target is the MCP server the checks talk to: HTTPTarget over Streamable
// HTTP, StdioTarget over a child process's pipes. Implementations must be
// safe for use by one goroutine at a time.
type Target interface {
	// Send delivers req as caller and returns the server's answer to it.
	// An error means no answer at all (connection refused or reset, a
	// timeout, a crash), not a JSON-RPC error.
	Send(ctx context.Context, caller Caller, req *Request) (*Reply, error)
	// HasOther reports whether the target can send as Other.
	HasOther() bool
	// Stdio reports whether the target speaks the stdio transport. It
	// decides what the checks can ask and how they read an answer: the
	// era is found with server/discover (over HTTP: a modern tools/list),
	// there is one caller and no HTTP status, and a server error is
	// JSON-RPC's -32603 Internal error (over HTTP: a 5xx status).
	Stdio() bool
}

// HTTPTarget is an MCP server reached over Streamable HTTP.
type HTTPTarget struct {
	// URL is the MCP endpoint, like http://127.0.0.1:8080/mcp.
	URL string
	// Bearer and BearerOther are the tokens of Primary and Other; empty
	// means no Authorization header (and no Other caller when BearerOther
	// is empty).
	Bearer, BearerOther string
	// Client sends the requests; nil means http.DefaultTransport in a
	// client that follows no redirect, so that a bearer token goes to URL
	// and nowhere else (net/http would send it on to another port of the
	// same host). Send returns a redirect it gets as a *RedirectError.
	Client *http.Client
}

// maxReply caps the bytes read from one HTTP answer.
const maxReply = 8 << 20

// HasOther implements Target.
func (t *HTTPTarget) HasOther() bool { return t.BearerOther != "" }

// Stdio implements Target: false.
func (t *HTTPTarget) Stdio() bool { return false }

// Send implements Target.
func (t *HTTPTarget) Send(ctx context.Context, caller Caller, req *Request) (*Reply, error) {
	body, err := encodeRequest(req)
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json, text/event-stream")
	if req.Version != "" {
		hr.Header.Set("MCP-Protocol-Version", req.Version)
	}
	if req.Version == ModernVersion {
		hr.Header.Set("Mcp-Method", req.Method)
		if req.Name != "" && isHeaderSafe(req.Name) {
			hr.Header.Set("Mcp-Name", req.Name)
		}
	}
	tok := t.Bearer
	if caller == Other {
		tok = t.BearerOther
	}
	if tok != "" {
		hr.Header.Set("Authorization", "Bearer "+tok)
	}
	c := t.Client
	if c == nil {
		c = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	resp, err := c.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("post %s: %w", req.Method, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return nil, &RedirectError{Method: req.Method, Status: resp.StatusCode, Location: resp.Header.Get("Location")}
	}
	rep := &Reply{Status: resp.StatusCode, Session: resp.Header.Get("Mcp-Session-Id")}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	r := io.LimitReader(resp.Body, maxReply)
	switch ct {
	case "text/event-stream":
		rep.Message, err = responseEvent(r)
	case "application/json":
		var b []byte
		b, err = io.ReadAll(r)
		if json.Valid(b) && len(bytes.TrimSpace(b)) > 0 {
			rep.Message = bytes.TrimSpace(b)
		}
	default:
		_, err = io.Copy(io.Discard, r)
	}
	if err != nil {
		return nil, fmt.Errorf("read the answer to %s: %w", req.Method, err)
	}
	return rep, nil
}

// responseEvent reads an SSE stream up to the first event that is a
// JSON-RPC response (a message with an id and a result or an error), and
// returns its data.
func responseEvent(r io.Reader) (json.RawMessage, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxReply)
	var data []string
	flush := func() json.RawMessage {
		d := strings.Join(data, "\n")
		data = data[:0]
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal([]byte(d), &m) == nil && (m.Result != nil || m.Error != nil) {
			return json.RawMessage(d)
		}
		return nil
	}
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if msg := flush(); msg != nil {
				return msg, nil
			}
			continue
		}
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(d, " "))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(data) > 0 {
		return flush(), nil
	}
	return nil, nil
}

func encodeRequest(req *Request) ([]byte, error) {
	m := map[string]any{"jsonrpc": "2.0", "id": req.ID, "method": req.Method}
	if req.Params != nil {
		m["params"] = req.Params
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", req.Method, err)
	}
	return b, nil
}

// isHeaderSafe reports whether s can travel in an HTTP header as is.
func isHeaderSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// RedirectError is what HTTPTarget.Send returns for a redirect, which it
// does not follow. Run stops at the first one.
type RedirectError struct {
	Method   string // the request's method, like tools/call
	Status   int    // the HTTP status, 3xx
	Location string // the Location header as sent (the server's text)
}

func (e *RedirectError) Error() string {
	loc := e.Location
	if loc == "" {
		loc = "(no Location)"
	}
	return fmt.Sprintf("post %s: the server redirected (HTTP %d, to %s): mrtr probe follows no redirects (a bearer token goes to the URL given, nowhere else); if that is the endpoint, probe it instead",
		e.Method, e.Status, termtext.Line(loc))
}

// errNoOther is returned when a check needs the Other caller.
var errNoOther = errors.New("no other caller")
