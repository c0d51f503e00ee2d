package call

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/internal/termtext"
)

// callError explains why a call failed: the timeout or an interrupt
// rather than the error they caused, an HTTP refusal with what to do
// about it, a JSON-RPC error by its code, message and data. The server's
// words in it are cleaned of terminal controls by call (CleanError).
func callError(ctx context.Context, rec *httpRecorder, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		if errors.Is(cause, context.Canceled) {
			return base.ErrInterrupted
		}
		return cause
	}
	if je := serverError(err); je != nil {
		var data struct {
			Reason   string                     `json:"reason"`
			Required map[string]json.RawMessage `json:"requiredCapabilities"`
		}
		json.Unmarshal(je.Data, &data)
		msg := fmt.Sprintf("error %d: %s", je.Code, je.Message)
		if data.Reason == "rounds_exceeded" {
			msg = "the server's round limit was reached: " + msg
		}
		if len(je.Data) > 0 {
			msg += "\n  data: " + string(je.Data)
		}
		if hint := errorHint(je.Code, je.Message, data.Required, rec.endpoint); hint != "" {
			msg += "\n  " + hint
		}
		return errors.New(msg)
	}
	if hint := rec.hint(); hint != "" {
		// go-sdk falls back from 2026-07-28 to 2025-11-25 on any error and
		// reports the second attempt's bare status: say what the server
		// said instead.
		return errors.New(hint)
	}
	if msg := connectError(rec.endpoint, err); msg != "" {
		return errors.New(msg)
	}
	return err
}

// unknownName matches the error messages of servers asked for a tool or
// a prompt they do not have: go-sdk's `unknown tool "x"`, the TypeScript
// SDK's `Tool x not found`.
var (
	unknownTool   = regexp.MustCompile(`(?i)unknown tool|tool .* not found`)
	unknownPrompt = regexp.MustCompile(`(?i)unknown prompt|prompt .* not found`)
)

// errorHint is what to do about a JSON-RPC error of the server, or "":
// an unknown tool or prompt points at the listing, a capability the
// client did not declare at the flag that declares it.
func errorHint(code int64, message string, required map[string]json.RawMessage, endpoint string) string {
	switch {
	case code == jsonrpc.CodeInvalidParams && unknownTool.MatchString(message):
		return "mrtr call " + endpoint + " lists the server's tools"
	case code == jsonrpc.CodeInvalidParams && unknownPrompt.MatchString(message):
		return "mrtr call " + endpoint + " lists the server's prompts"
	case code == mcpCodeMissingCapability && required["roots"] != nil:
		return "the server needs roots: offer one with --root file:///path/to/dir (repeatable)"
	}
	return ""
}

// mcpCodeMissingCapability is MCP 2026-07-28's error for a request that
// needs a client capability the client did not declare.
const mcpCodeMissingCapability = -32021

// connectError says in one line why no answer came from endpoint when
// the network is the cause (nothing listening, no such host, a refused
// TLS handshake), with what to check; "" for any other error.
func connectError(endpoint string, err error) string {
	var dns *net.DNSError
	var op *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("cannot connect to %s: connection refused; is the server running, and are the host and port right?", endpoint)
	case errors.As(err, &dns) && dns.IsNotFound:
		return fmt.Sprintf("cannot connect to %s: no such host %s; check the host name", endpoint, termtext.Line(dns.Name))
	case errors.As(err, &op):
		return fmt.Sprintf("cannot connect to %s: %v; check the URL and that the server is running", endpoint, op.Err)
	}
	return ""
}

// serverError finds the JSON-RPC error the server sent in err's tree.
// It skips go-sdk's own transport sentinels, which are JSON-RPC errors
// too: -32003 client closing, -32004 server closing, -32005 rejected by
// transport (which wraps network failures).
func serverError(err error) *jsonrpc.Error {
	if je, ok := err.(*jsonrpc.Error); ok && (je.Code > -32003 || je.Code < -32005) {
		return je
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if e := u.Unwrap(); e != nil {
			return serverError(e)
		}
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if je := serverError(e); je != nil {
				return je
			}
		}
	}
	return nil
}

// noRedirects is the CheckRedirect of mrtr call and mrtr probe: a
// redirect is not followed (the bearer token goes to the URL given and
// nowhere else, not even another port of the same host, which
// net/http would send it to) but returned as the answer, for the caller
// to report.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// httpRecorder adds the bearer token to every request and keeps the last
// refusal or redirect of the server, to explain it.
type httpRecorder struct {
	token    string
	base     http.RoundTripper
	endpoint string // the URL called, redacted, for the errors

	mu   sync.Mutex
	last *http.Response // status, header and request of the last 3xx or 4xx; body closed
}

func (t *httpRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+t.token)
	}
	resp, err := t.base.RoundTrip(r)
	if err == nil && resp.StatusCode >= 300 && resp.StatusCode < 500 {
		t.mu.Lock()
		t.last = &http.Response{StatusCode: resp.StatusCode, Status: resp.Status, Header: resp.Header.Clone(), Request: r}
		t.mu.Unlock()
	}
	return resp, err
}

// hint explains the last refusal: a redirect (not followed), a missing or
// refused bearer token, with the error the server gave in
// WWW-Authenticate (RFC 6750 §3), or a path that is not an MCP endpoint.
// It returns "" for anything else.
func (t *httpRecorder) hint() string {
	t.mu.Lock()
	last := t.last
	t.mu.Unlock()
	if last == nil {
		return ""
	}
	challenge := authParams(last.Header.Get("WWW-Authenticate"))
	said := ""
	if code := challenge["error"]; code != "" {
		said = " (" + code
		if d := challenge["error_description"]; d != "" {
			said += ": " + d
		}
		said += ")"
	}
	status := last.Status
	if status == "" {
		status = fmt.Sprint(last.StatusCode)
	}
	switch {
	case last.StatusCode < 400:
		loc := last.Header.Get("Location")
		if loc == "" {
			loc = "(no Location)"
		}
		return fmt.Sprintf("the server answered %s for %s, to %s: mrtr call follows no redirects (a bearer token goes to the URL given, nowhere else); if that is the endpoint, call it instead",
			status, last.Request.URL.Redacted(), termtext.Line(loc))
	case last.StatusCode == http.StatusUnauthorized && t.token == "":
		return fmt.Sprintf("the server wants a bearer token (%s%s) and none was sent: pass --bearer TOKEN or set $MRTR_BEARER", status, said)
	case last.StatusCode == http.StatusUnauthorized:
		return fmt.Sprintf("the server refused the bearer token (%s%s): it may be expired, for another server (audience) or malformed; get a new one and pass it with --bearer or $MRTR_BEARER", status, said)
	case last.StatusCode == http.StatusForbidden && challenge["error"] == "insufficient_scope":
		need := ""
		if s := challenge["scope"]; s != "" {
			need = "; it needs scope " + s
		}
		return fmt.Sprintf("the server refused the bearer token's scope (%s%s)%s", status, said, need)
	case last.StatusCode == http.StatusNotFound:
		u := last.Request.URL
		q := fmt.Sprintf("is %s the MCP endpoint? mrtr serve and mrtr proxy serve it at /mcp", u.Path)
		if u.Path != "/mcp" && !strings.HasSuffix(u.Path, "/mcp") {
			q = fmt.Sprintf("is the path right? MCP servers usually answer at /mcp (%s://%s/mcp), as mrtr serve and mrtr proxy do", u.Scheme, u.Host)
		}
		return fmt.Sprintf("the server answered %s for %s: %s", status, u.Redacted(), q)
	}
	return ""
}

// authParams reads the auth-params of a Bearer challenge (RFC 7235
// §2.1): key=value or key="quoted value", comma-separated.
func authParams(h string) map[string]string {
	out := map[string]string{}
	scheme, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return out
	}
	for rest = strings.TrimSpace(rest); rest != ""; {
		k, v, ok := strings.Cut(rest, "=")
		if !ok {
			break
		}
		k, rest = strings.ToLower(strings.TrimSpace(k)), strings.TrimLeft(v, " ")
		if strings.HasPrefix(rest, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(rest) && rest[i] != '"'; i++ {
				if rest[i] == '\\' && i+1 < len(rest) {
					i++
				}
				b.WriteByte(rest[i])
			}
			v, rest = b.String(), rest[min(i+1, len(rest)):]
		} else {
			v, rest, _ = strings.Cut(rest, ",")
			v = strings.TrimSpace(v)
		}
		out[k] = v
		rest = strings.TrimLeft(strings.TrimSpace(rest), ",")
		rest = strings.TrimSpace(rest)
	}
	return out
}
