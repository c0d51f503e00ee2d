package call

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/internal/termtext"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/clientcmd"
)

const callSynopsis = "mrtr call URL [TOOL | --prompt NAME | --resource URI] [--arg k=v ...] [--args-json JSON] [--bearer TOKEN] [--root URI ...] [--max-rounds 50] [--legacy] [--timeout 60s] [--json]"

const callHelp = `
Call TOOL on the MCP server at URL (Streamable HTTP, e.g.
http://localhost:8080/mcp) and print its result; --prompt NAME gets a
prompt and --resource URI reads a resource instead. Without any of them,
list the server's tools, prompts and resources with their inputs.

When the server needs input, you answer here and the request resumes, for
up to --max-rounds rounds:
  - a form (elicitation): each field is asked in turn; Enter on an empty
    line takes the default shown in [brackets] or skips an optional field.
    Type :decline to refuse the form, :cancel to dismiss it; Ctrl-D (end
    of input) cancels it too. Ctrl-C leaves the call at once: the server
    hears nothing more.
  - a sampling request: the messages are shown and you type the model's
    reply (one line); :decline, :cancel or Ctrl-D refuse it, which ends
    the call. Sampling is always declared: you are the model.
  - a roots request: answered with the --root URIs. The roots capability
    is declared only when --root is given.

Protocol 2026-07-28 (Multi Round-Trip Requests) by default, falling back
to 2025-11-25 for a server that does not speak it; --legacy forces
2025-11-25, where the server sends its own requests and keeps count of the
rounds itself (--max-rounds does not apply).

Text content goes to stdout, other content as a summary, structured content
as JSON when it adds something to the text (--json: the whole result as
the server sent it). A tool error (isError) goes to stderr and exits 1, as
does a JSON-RPC error. Everything the server chose is shown without terminal
controls (escape sequences, bidi overrides), in a pipe too. Redirects are
not followed (the bearer token goes to URL and nowhere else): one is
reported, with where it pointed.

Flags:
`

// callExamples end mrtr call --help.
const callExamples = `  mrtr call http://127.0.0.1:8080/mcp                      list the tools, prompts and resources
  mrtr call http://127.0.0.1:8080/mcp guess_number --arg max=100
  mrtr call http://127.0.0.1:8080/mcp deploy --arg service=api --arg env=staging
  mrtr call http://127.0.0.1:8080/mcp --prompt NAME --arg k=v
  mrtr call http://127.0.0.1:8080/mcp --resource test://static-text
  mrtr call http://127.0.0.1:8080/mcp TOOL --root file:///home/me/src --json
  mrtr call 127.0.0.1:8080/mcp                              a loopback host: http:// is taken
  MRTR_BEARER=TOKEN mrtr call https://mcp.example.com/mcp   the token kept out of ps
`

// legacyProtocol is the protocol --legacy speaks.
const legacyProtocol = "2025-11-25"

// defaultMaxRounds is the client's own limit on the rounds of one
// request: well above any server's sensible cap (mrtr's guard allows 10
// by default), so the server's limit is the one a flow meets first.
const defaultMaxRounds = 50

// maxBusyRounds is how many input_required results in a row without any
// input request (the server shedding load) the client retries.
const maxBusyRounds = 3

// Cmd is mrtr call.
var Cmd = &base.Command{Name: "call", Run: call}

// call runs mrtr call; its error (which may quote the server) is
// cleaned of terminal controls.
func call(ctx context.Context, a *base.App, args []string) error {
	return clientcmd.CleanError(callCmd(ctx, a, args))
}

func callCmd(ctx context.Context, a *base.App, args []string) error {
	fs := a.NewFlagSet("call", callSynopsis)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n%s", callSynopsis, callHelp)
		base.PrintDefaults(fs)
		fmt.Fprintf(fs.Output(), "\nExamples:\n%s", callExamples)
	}
	var kvs []string
	fs.Func("arg", "a tool or prompt argument `k=v` (repeatable); for a tool, v is JSON if it parses as JSON (42, true, {...}), else a string",
		func(s string) error {
			if k, _, ok := strings.Cut(s, "="); !ok || k == "" {
				return errors.New("want k=v")
			}
			kvs = append(kvs, s)
			return nil
		})
	var roots []*mcp.Root
	fs.Func("root", "a root `URI` to offer the server (file:///path, repeatable); declares the roots capability", func(s string) error {
		u, err := url.Parse(s)
		if err != nil || u.Scheme != "file" || u.Path == "" {
			return errors.New("want a file:// URI, like file:///home/me/project")
		}
		roots = append(roots, &mcp.Root{URI: s, Name: u.Path})
		return nil
	})
	argsJSON := fs.String("args-json", "", "the arguments as a JSON `object`; --arg entries are merged over it")
	bearer := fs.String("bearer", "", "a bearer `token` for the Authorization header ($MRTR_BEARER, which ps cannot show)")
	legacy := fs.Bool("legacy", false, "speak protocol "+legacyProtocol+" instead of 2026-07-28")
	timeout := fs.Duration("timeout", 60*time.Second, "give up when the server has not answered for this long; time at a prompt does not count (0: no limit)")
	maxRounds := fs.Int("max-rounds", defaultMaxRounds, "answer at most this many rounds of input requests in one request (2026-07-28)")
	promptName := fs.String("prompt", "", "get the prompt `NAME` instead of calling a tool")
	resourceURI := fs.String("resource", "", "read the resource `URI` instead of calling a tool")
	asJSON := fs.Bool("json", false, "print the result of the tool, prompt or resource as JSON, as the server sent it (terminal controls escaped)")
	pos, err := a.Parse(fs, args)
	if err != nil {
		return err
	}
	var tool string
	switch {
	case len(pos) == 2 && *promptName == "" && *resourceURI == "":
		tool = pos[1]
	case len(pos) == 1 && (*promptName == "" || *resourceURI == ""):
	default:
		fs.Usage()
		return base.ErrUsage
	}
	endpoint, err := clientcmd.EndpointURL(pos[0])
	if err != nil {
		fmt.Fprintf(a.Stderr, "mrtr call: %v\n", err)
		return base.ErrUsage
	}
	u, _ := url.Parse(endpoint)
	if *timeout < 0 {
		fmt.Fprintf(a.Stderr, "mrtr call: --timeout must not be negative\n")
		return base.ErrUsage
	}
	if *maxRounds < 1 {
		fmt.Fprintf(a.Stderr, "mrtr call: --max-rounds must be at least 1\n")
		return base.ErrUsage
	}
	arguments, typed, err := clientcmd.ToolArguments(*argsJSON, kvs)
	if err != nil {
		fmt.Fprintf(a.Stderr, "mrtr call: %v\n", err)
		return base.ErrUsage
	}
	token := *bearer
	if token == "" {
		token = a.Getenv("MRTR_BEARER")
	}
	if strings.ContainsFunc(token, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return errors.New("the bearer token has control characters an HTTP header cannot carry")
	}
	if token != "" && u.Scheme == "http" && !clientcmd.LoopbackHost(u.Hostname()) {
		fmt.Fprintf(a.Stderr, "mrtr call: warning: sending a bearer token to %s over plain http\n", u.Host)
	}

	// The whole call shares one deadline that pauses while a person
	// answers: the limit is on waiting for the server, not on thinking.
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errTimeout := fmt.Errorf("no answer from the server within %v", *timeout)
	idle := NewIdleTimer(*timeout, a.AfterFunc, func() { cancel(errTimeout) })
	defer idle.Stop()

	p := NewPrompter(a.Stdin, a.Stdout)
	// atPrompt runs a question of the server's: on 2025-11-25 it is a
	// request whose context outlives the call, so end it with the call.
	atPrompt := func(hctx context.Context, ask func(context.Context) error) error {
		hctx, stop := context.WithCancelCause(hctx)
		defer stop(nil)
		defer context.AfterFunc(ctx, func() { stop(context.Cause(ctx)) })()
		idle.Pause()
		defer idle.Resume()
		return ask(hctx)
	}
	in := &inputs{p: p, roots: roots, atPrompt: atPrompt}
	if len(roots) > 0 {
		// Said once at the end when the server never asked: a server may
		// take its roots elsewhere (behind mrtr proxy, from --roots).
		defer func() {
			cut := parent.Err() != nil || errors.Is(context.Cause(ctx), errTimeout) // interrupted, timed out
			if !cut && !in.rootsAsked.Load() {
				fmt.Fprintf(a.Stderr, "mrtr call: note: the server never asked for roots: --root did nothing in this call\n")
			}
		}()
	}
	caps := &mcp.ClientCapabilities{} // no roots unless --root
	if len(roots) > 0 {
		caps.RootsV2 = &mcp.RootCapabilities{}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mrtr", Version: base.Version}, &mcp.ClientOptions{
		Capabilities:   caps,
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}, // the rounds are ours: see rounds
		ElicitationHandler: func(hctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return in.elicit(hctx, req.Params)
		},
		CreateMessageHandler: func(hctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return in.sample(hctx, req.Params)
		},
	})
	client.AddRoots(roots...)
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "roots/list" { // 2025-11-25: go-sdk answers it from AddRoots
				in.rootsAsked.Store(true)
			}
			return next(ctx, method, req)
		}
	})
	rec := &httpRecorder{token: token, base: http.DefaultTransport, endpoint: u.Redacted()}
	transport := &mcp.StreamableClientTransport{
		Endpoint:             endpoint,
		HTTPClient:           &http.Client{Transport: rec, CheckRedirect: noRedirects},
		DisableStandaloneSSE: true, // no notifications wanted; legacy requests arrive on the call's own stream
	}
	var sopts *mcp.ClientSessionOptions
	if *legacy {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: legacyProtocol}
	}
	cs, err := client.Connect(ctx, transport, sopts)
	if err != nil {
		return callError(ctx, rec, fmt.Errorf("connect: %w", err))
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

	r := &rounds{max: *maxRounds, answer: in.answer}
	switch {
	case *promptName != "":
		params := &mcp.GetPromptParams{Name: *promptName, Arguments: promptArguments(arguments)}
		var res *mcp.GetPromptResult
		err = r.run(ctx, func(resp mcp.InputResponseMap, state string) (mcp.InputRequestMap, string, bool, error) {
			params.InputResponses, params.RequestState = resp, state
			res, err = cs.GetPrompt(ctx, params)
			if err != nil {
				return nil, "", false, err
			}
			return res.InputRequests, res.RequestState, res.NeedsInput(), nil
		})
		if err != nil {
			return callError(ctx, rec, err)
		}
		if *asJSON {
			return printJSON(a, res)
		}
		printPrompt(a, res)
		return nil
	case *resourceURI != "":
		params := &mcp.ReadResourceParams{URI: *resourceURI}
		var res *mcp.ReadResourceResult
		err = r.run(ctx, func(resp mcp.InputResponseMap, state string) (mcp.InputRequestMap, string, bool, error) {
			params.InputResponses, params.RequestState = resp, state
			res, err = cs.ReadResource(ctx, params)
			if err != nil {
				return nil, "", false, err
			}
			return res.InputRequests, res.RequestState, res.NeedsInput(), nil
		})
		if err != nil {
			return callError(ctx, rec, err)
		}
		if *asJSON {
			return printJSON(a, res)
		}
		for _, c := range res.Contents {
			printResource(a, c)
		}
		return nil
	case tool == "":
		if err := list(ctx, a, cs); err != nil {
			return callError(ctx, rec, err)
		}
		return nil
	}

	if len(typed) > 0 {
		for k := range stringParams(ctx, cs, tool) {
			if s, ok := typed[k]; ok {
				arguments[k] = s
			}
		}
	}
	params := &mcp.CallToolParams{Name: tool, Arguments: arguments}
	var res *mcp.CallToolResult
	err = r.run(ctx, func(resp mcp.InputResponseMap, state string) (mcp.InputRequestMap, string, bool, error) {
		params.InputResponses, params.RequestState = resp, state
		res, err = cs.CallTool(ctx, params)
		if err != nil {
			return nil, "", false, err
		}
		return res.InputRequests, res.RequestState, res.NeedsInput(), nil
	})
	if err != nil {
		return callError(ctx, rec, err)
	}
	if *asJSON {
		if err := printJSON(a, res); err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("tool %s reported an error", tool)
		}
		return nil
	}
	return printResult(a, tool, res)
}

// rounds drives the rounds of one request (go-sdk's automatic loop is
// off: it stops after 10 whatever the server allows, and does not say
// whose limit it was).
type rounds struct {
	max    int
	answer func(context.Context, mcp.InputRequestMap) (mcp.InputResponseMap, error)
}

// ErrClientRounds reports that the client's --max-rounds was reached.
var ErrClientRounds = errors.New("this client's round limit was reached")

// run sends the request through step until its result needs no more
// input: step sends the answers and the state of the previous round
// (none on the first) and returns the result's input requests, its
// state and whether it needs input.
func (r *rounds) run(ctx context.Context, step func(mcp.InputResponseMap, string) (mcp.InputRequestMap, string, bool, error)) error {
	var resp mcp.InputResponseMap
	var state string
	answered, busy := 0, 0
	for {
		reqs, next, needs, err := step(resp, state)
		if err != nil {
			return err
		}
		if !needs {
			return nil
		}
		state = next
		if len(reqs) == 0 { // load shedding: ask again with the same answers
			if busy++; busy >= maxBusyRounds {
				return fmt.Errorf("the server is busy: it asked to retry %d times in a row; try again later", busy)
			}
			continue
		}
		busy = 0
		if answered == r.max {
			return fmt.Errorf("%w: the server asked for input a %s time, and --max-rounds is %d (raise it to go on)",
				ErrClientRounds, ordinal(answered+1), r.max)
		}
		if resp, err = r.answer(ctx, reqs); err != nil {
			return err
		}
		answered++
	}
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// inputs answers the server's input requests: forms and sampling at the
// terminal, roots from the flags.
type inputs struct {
	p          *prompter
	roots      []*mcp.Root
	atPrompt   func(context.Context, func(context.Context) error) error
	rootsAsked atomic.Bool // the server asked for roots, in a round or (2025-11-25) by a request
}

func (in *inputs) elicit(ctx context.Context, params *mcp.ElicitParams) (res *mcp.ElicitResult, err error) {
	err = in.atPrompt(ctx, func(ctx context.Context) error {
		res, err = in.p.elicit(ctx, params)
		return err
	})
	return res, err
}

func (in *inputs) sample(ctx context.Context, params *mcp.CreateMessageParams) (res *mcp.CreateMessageResult, err error) {
	err = in.atPrompt(ctx, func(ctx context.Context) error {
		res, err = in.p.Sample(ctx, params)
		return err
	})
	return res, err
}

// answer fulfils one round's input requests in key order, one at a
// time: they share the terminal.
func (in *inputs) answer(ctx context.Context, reqs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	resp := make(mcp.InputResponseMap, len(reqs))
	keys := make([]string, 0, len(reqs))
	for k := range reqs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		var r mcp.InputResponse
		var err error
		switch q := reqs[k].(type) {
		case *mcp.ElicitParams:
			r, err = in.elicit(ctx, q)
		case *mcp.CreateMessageParams:
			r, err = in.sample(ctx, q)
		case *mcp.CreateMessageWithToolsParams:
			var msgs []*mcp.SamplingMessage
			for _, m := range q.Messages {
				for _, c := range m.Content {
					msgs = append(msgs, &mcp.SamplingMessage{Role: m.Role, Content: c})
				}
			}
			var res *mcp.CreateMessageResult
			res, err = in.sample(ctx, &mcp.CreateMessageParams{Messages: msgs, SystemPrompt: q.SystemPrompt, MaxTokens: q.MaxTokens})
			if err == nil {
				r = &mcp.CreateMessageWithToolsResult{Content: []mcp.Content{res.Content}, Model: res.Model, Role: res.Role, StopReason: res.StopReason}
			}
		case *mcp.ListRootsParams:
			in.rootsAsked.Store(true)
			if len(in.roots) == 0 {
				err = errors.New("the server asks for roots, but this client offers none (--root URI offers one)")
			}
			r = &mcp.ListRootsResult{Roots: in.roots}
		default:
			err = fmt.Errorf("the server asks for input of a kind this client does not know (%T)", q)
		}
		if err != nil {
			return nil, fmt.Errorf("input request %q: %w", k, err)
		}
		resp[k] = r
	}
	return resp, nil
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
// rather than the error they caused, an HTTP refusal with what to do
// about it, a JSON-RPC error by its code, message and data. The server's
// words in it are cleaned of terminal controls by call (cleanError).
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

// promptArguments turns the parsed --arg and --args-json values into a
// prompt's string arguments: strings as themselves, anything else as
// JSON.
func promptArguments(args map[string]any) map[string]string {
	out := make(map[string]string, len(args))
	for k, v := range args {
		out[k] = valueString(v)
	}
	return out
}

// list prints the server's tools, prompts, resources and resource
// templates, each with its inputs.
func list(ctx context.Context, a *base.App, cs *mcp.ClientSession) error {
	caps := &mcp.ServerCapabilities{}
	if ir := cs.InitializeResult(); ir != nil && ir.Capabilities != nil {
		caps = ir.Capabilities
	}
	w := a.Stdout
	if caps.Tools != nil {
		fmt.Fprintln(w, "Tools (mrtr call URL TOOL --arg k=v):")
		for t, err := range cs.Tools(ctx, nil) {
			if err != nil {
				return fmt.Errorf("list tools: %w", err)
			}
			fmt.Fprintf(w, "  %s%s\n", termtext.Line(t.Name), summary(t.Description))
			fields := ParseElicitSchema(t.InputSchema)
			for _, f := range fields {
				fmt.Fprintf(w, "    %s (%s)%s\n", f.name, strings.Join(f.listFacts(), ", "), summary(f.title+" "+f.desc))
			}
		}
	}
	if caps.Prompts != nil {
		fmt.Fprintln(w, "Prompts (mrtr call URL --prompt NAME --arg k=v):")
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				return fmt.Errorf("list prompts: %w", err)
			}
			fmt.Fprintf(w, "  %s%s\n", termtext.Line(p.Name), summary(p.Description))
			for _, arg := range p.Arguments {
				req := "optional"
				if arg.Required {
					req = "required"
				}
				fmt.Fprintf(w, "    %s (%s)%s\n", termtext.Line(arg.Name), req, summary(arg.Description))
			}
		}
	}
	if caps.Resources != nil {
		fmt.Fprintln(w, "Resources (mrtr call URL --resource URI):")
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				return fmt.Errorf("list resources: %w", err)
			}
			fmt.Fprintf(w, "  %s (%s)%s\n", termtext.Line(r.URI), strings.Join(nonEmpty(termtext.Line(r.Name), termtext.Line(r.MIMEType)), ", "), summary(r.Description))
		}
		for r, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				return fmt.Errorf("list resource templates: %w", err)
			}
			fmt.Fprintf(w, "  %s (template: %s)%s\n", termtext.Line(r.URITemplate), strings.Join(nonEmpty(termtext.Line(r.Name), termtext.Line(r.MIMEType)), ", "), summary(r.Description))
		}
	}
	return nil
}

// summary is ": " and a description on one line, or "".
func summary(s string) string {
	if s = termtext.Line(s); s == "" {
		return ""
	}
	return ": " + s
}

func nonEmpty(ss ...string) []string {
	return slices.DeleteFunc(ss, func(s string) bool { return s == "" })
}

// printPrompt prints a prompt's description and its messages.
func printPrompt(a *base.App, res *mcp.GetPromptResult) {
	if res.Description != "" {
		fmt.Fprintf(a.Stdout, "%s\n", termtext.Clean(res.Description))
	}
	for _, m := range res.Messages {
		s := termtext.Clean(contentString(m.Content))
		fmt.Fprintf(a.Stdout, "%s: %s\n", termtext.Line(string(m.Role)), strings.TrimSuffix(s, "\n"))
	}
}

// printResource prints a resource's text as itself (cleaned of terminal
// controls), a blob as a summary.
func printResource(a *base.App, c *mcp.ResourceContents) {
	if c.Blob != nil || c.Text == "" {
		fmt.Fprintln(a.Stdout, contentString(&mcp.EmbeddedResource{Resource: c}))
		return
	}
	s := termtext.Clean(c.Text)
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	io.WriteString(a.Stdout, s)
}

// printResult prints a tool result: to stdout, or to stderr with an
// error to exit 1 if it is a tool error. Text is cleaned of terminal
// controls; structured content is JSON with the same values.
func printResult(a *base.App, tool string, res *mcp.CallToolResult) error {
	w := a.Stdout
	if res.IsError {
		w = a.Stderr
	}
	content, structured := res.Content, res.StructuredContent
	if structured != nil && len(content) == 1 {
		// Tools with structured output also send it as JSON text: show it once.
		if t, ok := content[0].(*mcp.TextContent); ok && sameJSON(t.Text, structured) {
			content = nil
		}
	}
	var text strings.Builder
	for _, c := range content {
		if t, ok := c.(*mcp.TextContent); ok {
			text.WriteString(t.Text)
		}
	}
	if structured != nil && content != nil && repeatsContent(content, text.String(), structured) {
		structured = nil // everything in it is shown already
	}
	for _, c := range content {
		s := termtext.Clean(contentString(c))
		if !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		io.WriteString(w, s)
	}
	if structured != nil {
		if b, err := json.MarshalIndent(res.StructuredContent, "", "  "); err == nil {
			fmt.Fprintf(w, "%s\n", termtext.JSON(b))
		}
	}
	if res.IsError {
		return fmt.Errorf("tool %s reported an error", tool)
	}
	return nil
}

// repeatsContent reports whether structured content adds nothing to the
// content shown: every value in it is a string the text holds, or the
// content list or one of its items again (server-filesystem's results
// carry their text as {"content": text}, a media file's block as
// {"content": [block]}). A number, a boolean or a string the text lacks
// is something more.
func repeatsContent(content []mcp.Content, text string, structured any) bool {
	v, ok := plainJSON(structured)
	if !ok {
		return false
	}
	shown := []any{}
	if all, ok := plainJSON(content); ok {
		shown = append(shown, all)
	}
	for _, c := range content {
		if item, ok := plainJSON(c); ok {
			shown = append(shown, item)
		}
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch v.(type) {
		case []any, map[string]any:
			for _, s := range shown {
				if reflect.DeepEqual(v, s) {
					return true
				}
			}
		}
		switch v := v.(type) {
		case string:
			return strings.Contains(text, v)
		case nil:
			return true
		case []any:
			for _, x := range v {
				if !walk(x) {
					return false
				}
			}
			return true
		case map[string]any:
			for _, x := range v {
				if !walk(x) {
					return false
				}
			}
			return true
		}
		return false
	}
	return walk(v)
}

// plainJSON is v as encoding/json decodes its JSON into an any.
func plainJSON(v any) (any, bool) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return nil, false
	}
	return out, true
}

// printJSON prints a result as the JSON the server sent (its fields as
// go-sdk decodes them), indented, its strings free of terminal controls.
func printJSON(a *base.App, res any) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the result: %w", err)
	}
	fmt.Fprintf(a.Stdout, "%s\n", termtext.JSON(b))
	return nil
}

// contentString shows text as itself and summarizes everything else,
// the server's names, URIs and types in a summary on one line, cleaned
// of terminal controls. Text is left as the server sent it: the caller
// cleans it.
func contentString(c mcp.Content) string {
	switch c := c.(type) {
	case *mcp.TextContent:
		return c.Text
	case *mcp.ImageContent:
		return fmt.Sprintf("[image %s, %d bytes]", termtext.Line(c.MIMEType), len(c.Data))
	case *mcp.AudioContent:
		return fmt.Sprintf("[audio %s, %d bytes]", termtext.Line(c.MIMEType), len(c.Data))
	case *mcp.ResourceLink:
		s := "[resource link " + termtext.Line(c.URI)
		if name := termtext.Line(c.Name); name != "" {
			s += " (" + name + ")"
		}
		return s + "]"
	case *mcp.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return "[resource]"
		}
		s := "[resource " + termtext.Line(r.URI)
		if mt := termtext.Line(r.MIMEType); mt != "" {
			s += ", " + mt
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
	return fmt.Sprintf("[%s content]", termtext.Line(kind.Type))
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

// idleTimer calls expire once d has passed without a pause; pause and
// resume bracket the time spent at a prompt, which does not count, and
// each resume starts a fresh d. A zero d never expires. It is safe for
// concurrent use.
type idleTimer struct {
	mu      sync.Mutex
	d       time.Duration
	t       base.StopTimer
	paused  int
	stopped bool
}

// NewIdleTimer starts the timer with after (nil: time.AfterFunc).
func NewIdleTimer(d time.Duration, after base.AfterFunc, expire func()) *idleTimer {
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

func (w *idleTimer) Pause() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.paused++; w.paused == 1 && w.t != nil {
		w.t.Stop()
	}
}

func (w *idleTimer) Resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.paused--; w.paused == 0 && w.t != nil && !w.stopped {
		w.t.Reset(w.d)
	}
}

func (w *idleTimer) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.t != nil {
		w.t.Stop()
	}
}

// Sample shows a sampling request's messages and takes the person's
// reply as the model's. Refusing it (:decline, :cancel, the end of
// input) is an error: sampling has no decline.
func (p *prompter) Sample(ctx context.Context, params *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.start(); err != nil {
		return nil, err
	}
	fmt.Fprintf(p.out, "\nThe server asks for a model's reply (sampling, up to %d tokens); you are the model.\n", params.MaxTokens)
	if s := termtext.Clean(params.SystemPrompt); s != "" {
		fmt.Fprintf(p.out, "system: %s\n", s)
	}
	for _, m := range params.Messages {
		fmt.Fprintf(p.out, "%s: %s\n", termtext.Line(string(m.Role)), strings.TrimSuffix(termtext.Clean(contentString(m.Content)), "\n"))
	}
	for {
		fmt.Fprint(p.out, "reply (:decline to refuse): ")
		line, err := p.readLine(ctx)
		if errors.Is(err, io.EOF) {
			return nil, errors.New("you refused the sampling request (end of input)")
		}
		if err != nil {
			return nil, err
		}
		if k := keyword(line); k != "" {
			return nil, fmt.Errorf("you refused the sampling request (%s)", k)
		}
		if s := strings.TrimSpace(line); s != "" {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "a person at mrtr call",
				Content: &mcp.TextContent{Text: s}, StopReason: "endTurn"}, nil
		}
		fmt.Fprintln(p.out, "  type the reply, or :decline")
	}
}
