package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const callSynopsis = "mrtr call URL TOOL [--arg k=v ...] [--args-json JSON] [--bearer TOKEN] [--legacy] [--timeout 60s]"

const callHelp = `
Call TOOL on the MCP server at URL (Streamable HTTP) and print its result.
When the server needs input (an elicitation), you answer the questions here
and the call resumes, for as many rounds as the tool asks. The end of input
(Ctrl-D) cancels the elicitation.

Protocol 2026-07-28 (Multi Round-Trip Requests) by default, falling back
to 2025-11-25 for a server that does not speak it; --legacy forces
2025-11-25, where the server sends its own elicitation requests.

Text content goes to stdout, other content as a summary, structured content
as JSON. A tool error (isError) goes to stderr and exits 1, as does a
JSON-RPC error.

Flags:
`

// legacyProtocol is the protocol --legacy speaks.
const legacyProtocol = "2025-11-25"

func (a *app) call(ctx context.Context, args []string) error {
	fs := a.newFlagSet("call", callSynopsis)
	fs.Usage = func() {
		fmt.Fprintf(a.stderr, "Usage: %s\n%s", callSynopsis, callHelp)
		fs.PrintDefaults()
	}
	var kvs []string
	fs.Func("arg", "a tool argument `k=v` (repeatable); v is JSON if it parses as JSON (42, true, {...}), else a string",
		func(s string) error {
			if k, _, ok := strings.Cut(s, "="); !ok || k == "" {
				return errors.New("want k=v")
			}
			kvs = append(kvs, s)
			return nil
		})
	argsJSON := fs.String("args-json", "", "the tool arguments as a JSON `object`; --arg entries are merged over it")
	bearer := fs.String("bearer", "", "a bearer `token` for the Authorization header ($MRTR_BEARER, which ps cannot show)")
	legacy := fs.Bool("legacy", false, "speak protocol "+legacyProtocol+" instead of 2026-07-28")
	timeout := fs.Duration("timeout", 60*time.Second, "give up when the server has not answered for this long; time at a prompt does not count (0: no limit)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		fs.Usage()
		return errUsage
	}
	endpoint, tool := pos[0], pos[1]
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintf(a.stderr, "mrtr call: URL must be an http:// or https:// URL\n")
		return errUsage
	}
	if *timeout < 0 {
		fmt.Fprintf(a.stderr, "mrtr call: --timeout must not be negative\n")
		return errUsage
	}
	arguments, typed, err := toolArguments(*argsJSON, kvs)
	if err != nil {
		fmt.Fprintf(a.stderr, "mrtr call: %v\n", err)
		return errUsage
	}
	token := *bearer
	if token == "" {
		token = a.getenv("MRTR_BEARER")
	}
	if strings.ContainsFunc(token, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return errors.New("the bearer token has control characters an HTTP header cannot carry")
	}
	if token != "" && u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		fmt.Fprintf(a.stderr, "mrtr call: warning: sending a bearer token to %s over plain http\n", u.Host)
	}

	// The whole call shares one deadline that pauses while a person
	// answers: the limit is on waiting for the server, not on thinking.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errTimeout := fmt.Errorf("no answer from the server within %v", *timeout)
	idle := newIdleTimer(*timeout, a.afterFunc, func() { cancel(errTimeout) })
	defer idle.stop()

	p := newPrompter(a.stdin, a.stdout)
	client := mcp.NewClient(&mcp.Implementation{Name: "mrtr", Version: version}, &mcp.ClientOptions{
		ElicitationHandler: func(hctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			// On 2025-11-25 the elicitation is a request of the server's
			// whose context outlives the call: end the prompt with the call.
			hctx, stop := context.WithCancelCause(hctx)
			defer stop(nil)
			defer context.AfterFunc(ctx, func() { stop(context.Cause(ctx)) })()
			idle.pause()
			defer idle.resume()
			return p.elicit(hctx, req.Params)
		},
	})
	var rt http.RoundTripper = http.DefaultTransport
	if token != "" {
		rt = &bearerTransport{token: token, base: rt}
	}
	transport := &mcp.StreamableClientTransport{
		Endpoint:             endpoint,
		HTTPClient:           &http.Client{Transport: rt},
		DisableStandaloneSSE: true, // no notifications wanted; legacy elicitations arrive on the call's own stream
	}
	var sopts *mcp.ClientSessionOptions
	if *legacy {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: legacyProtocol}
	}
	cs, err := client.Connect(ctx, transport, sopts)
	if err != nil {
		return callError(ctx, fmt.Errorf("connect: %w", err))
	}
	defer func() {
		// Interrupted or timed out: leave without the session's goodbye.
		// A 2025-11-25 server still waiting for an elicitation answer
		// holds the DELETE (go-sdk v1.8.0 closes the session only after
		// its handlers return), and whoever pressed Ctrl-C wants out now.
		if ctx.Err() == nil {
			cs.Close()
		}
		cancel(nil) // ends a prompt of the server's still open
		p.close()
	}()

	if len(typed) > 0 {
		for k := range stringParams(ctx, cs, tool) {
			if s, ok := typed[k]; ok {
				arguments[k] = s
			}
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: arguments})
	if err != nil {
		return callError(ctx, err)
	}
	return a.printResult(tool, res)
}

// toolArguments merges --args-json and the --arg entries. An --arg value
// is JSON if it parses as JSON, else a string; typed keeps the original
// text of the values that parsed as something else than a string, so
// that a string-typed parameter can take it back ("123" stays "123").
func toolArguments(argsJSON string, kvs []string) (args map[string]any, typed map[string]string, err error) {
	args, typed = map[string]any{}, map[string]string{}
	if argsJSON != "" {
		v, ok := parseJSON(argsJSON)
		obj, isObj := v.(map[string]any)
		if !ok || !isObj {
			return nil, nil, errors.New("--args-json: want a JSON object")
		}
		args = obj
	}
	for _, kv := range kvs {
		k, s, _ := strings.Cut(kv, "=")
		delete(typed, k)
		v, ok := parseJSON(s)
		if !ok {
			v = s
		}
		args[k] = v
		if _, isString := v.(string); !isString {
			typed[k] = s
		}
	}
	return args, typed, nil
}

// parseJSON decodes one JSON value, keeping numbers exact.
func parseJSON(s string) (any, bool) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}

// stringParams returns the parameters of tool whose input schema allows
// only a string (or null). Any failure to list the tools just means no
// coercion: the server has the last word on its arguments.
func stringParams(ctx context.Context, cs *mcp.ClientSession, tool string) map[string]bool {
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil
		}
		if t.Name != tool {
			continue
		}
		data, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil
		}
		var schema struct {
			Properties map[string]struct {
				Type any `json:"type"`
			} `json:"properties"`
		}
		if json.Unmarshal(data, &schema) != nil {
			return nil
		}
		strs := map[string]bool{}
		for k, p := range schema.Properties {
			switch t := p.Type.(type) {
			case string:
				if t == "string" {
					strs[k] = true
				}
			case []any:
				str, only := false, true
				for _, x := range t {
					switch x {
					case "string":
						str = true
					case "null":
					default:
						only = false
					}
				}
				if str && only {
					strs[k] = true
				}
			}
		}
		return strs
	}
	return nil
}

// callError explains why a call failed: the timeout or an interrupt
// rather than the error they caused, a JSON-RPC error by its code,
// message and data.
func callError(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		if errors.Is(cause, context.Canceled) {
			return errors.New("interrupted")
		}
		return cause
	}
	if je := serverError(err); je != nil {
		msg := fmt.Sprintf("error %d: %s", je.Code, printable(je.Message))
		if len(je.Data) > 0 {
			msg += "\n  data: " + printable(string(je.Data))
		}
		return errors.New(msg)
	}
	return err
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

// printResult prints a tool result: to stdout, or to stderr with an
// error to exit 1 if it is a tool error.
func (a *app) printResult(tool string, res *mcp.CallToolResult) error {
	w := a.stdout
	if res.IsError {
		w = a.stderr
	}
	content := res.Content
	if res.StructuredContent != nil && len(content) == 1 {
		// Tools with structured output also send it as JSON text: show it once.
		if t, ok := content[0].(*mcp.TextContent); ok && sameJSON(t.Text, res.StructuredContent) {
			content = nil
		}
	}
	for _, c := range content {
		s := contentString(c)
		if !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		io.WriteString(w, s)
	}
	if res.StructuredContent != nil {
		if b, err := json.MarshalIndent(res.StructuredContent, "", "  "); err == nil {
			fmt.Fprintf(w, "%s\n", b)
		}
	}
	if res.IsError {
		return fmt.Errorf("tool %s reported an error", tool)
	}
	return nil
}

// contentString shows text as itself and summarizes everything else.
func contentString(c mcp.Content) string {
	switch c := c.(type) {
	case *mcp.TextContent:
		return c.Text
	case *mcp.ImageContent:
		return fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data))
	case *mcp.AudioContent:
		return fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data))
	case *mcp.ResourceLink:
		s := "[resource link " + c.URI
		if c.Name != "" {
			s += " (" + c.Name + ")"
		}
		return s + "]"
	case *mcp.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return "[resource]"
		}
		s := "[resource " + r.URI
		if r.MIMEType != "" {
			s += ", " + r.MIMEType
		}
		if r.Blob != nil {
			s += fmt.Sprintf(", %d bytes", len(r.Blob))
		} else {
			s += fmt.Sprintf(", %d bytes of text", len(r.Text))
		}
		return s + "]"
	}
	var kind struct {
		Type string `json:"type"`
	}
	if b, err := json.Marshal(c); err == nil {
		json.Unmarshal(b, &kind)
	}
	return fmt.Sprintf("[%s content]", kind.Type)
}

// sameJSON reports whether text is JSON for the same value as v.
func sameJSON(text string, v any) bool {
	var t any
	if json.Unmarshal([]byte(text), &t) != nil {
		return false
	}
	a, err1 := json.Marshal(t)
	b, err2 := json.Marshal(v)
	return err1 == nil && err2 == nil && string(a) == string(b)
}

func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// bearerTransport adds an Authorization header to every request.
type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (t *bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.base.RoundTrip(r)
}

// idleTimer calls expire once d has passed without a pause; pause and
// resume bracket the time spent at a prompt, which does not count, and
// each resume starts a fresh d. A zero d never expires. It is safe for
// concurrent use.
type idleTimer struct {
	mu      sync.Mutex
	d       time.Duration
	t       stopTimer
	paused  int
	stopped bool
}

// stopTimer is what idleTimer needs of the *time.Timer that
// time.AfterFunc returns.
type stopTimer interface {
	Stop() bool
	Reset(time.Duration) bool
}

// afterFunc is time.AfterFunc's shape; tests pass one whose timer they
// fire by hand.
type afterFunc func(time.Duration, func()) stopTimer

// newIdleTimer starts the timer with after (nil: time.AfterFunc).
func newIdleTimer(d time.Duration, after afterFunc, expire func()) *idleTimer {
	w := &idleTimer{d: d}
	switch {
	case d <= 0:
	case after == nil:
		w.t = time.AfterFunc(d, expire)
	default:
		w.t = after(d, expire)
	}
	return w
}

func (w *idleTimer) pause() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.paused++; w.paused == 1 && w.t != nil {
		w.t.Stop()
	}
}

func (w *idleTimer) resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.paused--; w.paused == 0 && w.t != nil && !w.stopped {
		w.t.Reset(w.d)
	}
}

func (w *idleTimer) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.t != nil {
		w.t.Stop()
	}
}
