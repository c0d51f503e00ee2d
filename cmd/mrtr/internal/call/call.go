package call

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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

A tool may answer with a task (the io.modelcontextprotocol/tasks
extension, which mrtr call declares on tools/call): the task is polled at
the interval it suggests, each change of its status is printed to stderr,
its questions are asked as above and sent with tasks/update, and its
result is printed as a completed call's; a failed task is a JSON-RPC
error. Waiting on a task counts toward --timeout (--timeout 0 for a long
one); Ctrl-C or the timeout cancels it (tasks/cancel).

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
  mrtr call http://127.0.0.1:8080/mcp confirm_delete --arg filename=notes.txt   a task that asks
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
	idle := newIdleTimer(*timeout, a.AfterFunc, func() { cancel(errTimeout) })
	defer idle.stop()

	p := newPrompter(a.Stdin, a.Stdout)
	// atPrompt runs a question of the server's: on 2025-11-25 it is a
	// request whose context outlives the call, so end it with the call.
	atPrompt := func(hctx context.Context, ask func(context.Context) error) error {
		hctx, stop := context.WithCancelCause(hctx)
		defer stop(nil)
		defer context.AfterFunc(ctx, func() { stop(context.Cause(ctx)) })()
		idle.pause()
		defer idle.resume()
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
	tap := &taskTap{base: rec}
	hc := &http.Client{Transport: tap, CheckRedirect: noRedirects}
	tasks := &taskClient{endpoint: endpoint, http: hc, stderr: a.Stderr, max: *maxRounds, answer: in.answer}
	client.AddSendingMiddleware(tasks.declareTasks)
	transport := &mcp.StreamableClientTransport{
		Endpoint:             endpoint,
		HTTPClient:           hc,
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
	if err == nil && isTask(res) {
		// A task (tasks.go): followed to its end, its result printed as
		// a completed call's.
		var created *wireTask
		if created, err = tap.created(); err == nil {
			res, err = tasks.follow(ctx, created)
		}
		if err != nil && errors.Is(context.Cause(ctx), errTimeout) {
			return fmt.Errorf("the task did not end within %v (--timeout 0 waits for as long as it takes)", *timeout)
		}
	}
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
