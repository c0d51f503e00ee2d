package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Defaults of Options.
const (
	// DefaultMaxRequests bounds the requests of one Run.
	DefaultMaxRequests = 200
	// DefaultTimeout bounds the wait for one answer.
	DefaultTimeout = 30 * time.Second
	// OversizedLen is the length of the oversized check's state: 1 MiB.
	OversizedLen = 1 << 20
)

// The check names, in report order.
const (
	CheckReadable         = "readable"
	CheckTampered         = "tampered"
	CheckMoved            = "moved"
	CheckArgumentsChanged = "arguments_changed"
	CheckReplayed         = "replayed"
	CheckAnotherCaller    = "another_caller"
	CheckExpired          = "expired"
	CheckOversized        = "oversized"
	CheckNotAString       = "not_a_string"
	CheckErrorShape       = "error_shape"
)

// Names lists every check, in report order.
var Names = []string{CheckReadable, CheckTampered, CheckMoved, CheckArgumentsChanged, CheckReplayed,
	CheckAnotherCaller, CheckExpired, CheckOversized, CheckNotAString, CheckErrorShape}

// why says, per check, why it matters: the spec's words or the attack.
var why = map[string]string{
	CheckReadable:         "the client holds the state: anything readable in it is readable by the user, by the agent and by whoever captures the traffic",
	CheckTampered:         "the spec: requestState is attacker-controlled, servers MUST integrity-protect state that influences authorization or business logic",
	CheckMoved:            "a state issued for one tool (or method) must not resume another: otherwise a harmless flow's state drives a dangerous one",
	CheckArgumentsChanged: "a confirmation given for these arguments must not run with others (approve $5, transfer $5000)",
	CheckReplayed:         "the spec allows multi-use; single use is what stops a captured state from running the action again",
	CheckAnotherCaller:    "the spec: state that influences authorization MUST be bound to the user; otherwise a leaked state works for anyone",
	CheckExpired:          "a paused call must not be resumable forever: a stale approval must not run tomorrow",
	CheckOversized:        "a state is untrusted input: its size must be capped before any decoding, without a 5xx, a hang or a crash",
	CheckNotAString:       "requestState is a string; any other JSON type is malformed input and must be refused as such",
	CheckErrorShape:       "clients tell a refused state from a tool failure by a JSON-RPC error (-32602, as the SDKs answer) carrying their request's id",
}

// Why returns why the check name matters, for a report.
func Why(name string) string { return why[name] }

// Verdict is a check's result.
type Verdict string

// The verdicts.
const (
	Pass Verdict = "pass"
	Fail Verdict = "fail"
	Warn Verdict = "warn"
	Skip Verdict = "skip"
)

// Check is one line of a report.
type Check struct {
	Name    string  `json:"name"`
	Verdict Verdict `json:"verdict"`
	// Detail says what the check sent and what it saw.
	Detail string `json:"detail"`
}

// Report is the result of Run.
type Report struct {
	// Era is the protocol revision the server speaks: ModernVersion or
	// LegacyVersion.
	Era string `json:"era"`
	// Tool is the tool the checks paused; Others the other pausable tools
	// found (the moved check uses them).
	Tool   string   `json:"tool,omitempty"`
	Others []string `json:"otherTools,omitempty"`
	// Requests is how many requests the checks sent (discovery included).
	Requests int `json:"requests"`
	// Cleanup is how many more requests ended the flows the checks
	// paused (an honest resume that declines, see Run); Options.MaxRequests
	// bounds both together.
	Cleanup int `json:"cleanupRequests"`
	// Unchecked, when not empty, says why nothing could be checked (a
	// 2025-11-25 server, no tool that pauses with a requestState); every
	// check is then skipped.
	Unchecked string `json:"unchecked,omitempty"`
	// Incomplete names the checks of Essential that could not run, or
	// ran inconclusively, for a reason other than a flag not given: a run
	// with any of them checked less than it seems.
	Incomplete []string `json:"incomplete,omitempty"`
	Checks     []Check  `json:"checks"`
}

// Essential are the checks a run must complete (pass or fail) to say
// anything about the state's integrity: a run that only skipped or
// warned on one of them, for a reason other than a flag not given, is
// reported Incomplete.
var Essential = []string{CheckTampered, CheckMoved, CheckArgumentsChanged}

// Failed reports whether any check failed.
func (r *Report) Failed() bool {
	return slices.ContainsFunc(r.Checks, func(c Check) bool { return c.Verdict == Fail })
}

// Verdicts returns every check's verdict by name.
func (r *Report) Verdicts() map[string]Verdict {
	m := make(map[string]Verdict, len(r.Checks))
	for _, c := range r.Checks {
		m[c.Name] = c.Verdict
	}
	return m
}

// Get returns the check called name, or a zero Check.
func (r *Report) Get(name string) Check {
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	return Check{}
}

// Options configure Run. The zero value finds a pausable tool itself,
// answers every input request with a refusal and skips expired.
type Options struct {
	// Tool is the tool to pause; empty means the first tool that pauses
	// twice the same way with a requestState (every listed tool is
	// called, in order, until one does and a second one for the moved
	// check is found).
	Tool string
	// OtherTool is the second pausable tool of the moved check when Tool
	// is set (no other tool is called then unless named here).
	OtherTool string
	// Args are arguments for Tool, over the placeholders filled from its
	// input schema.
	Args map[string]any
	// Answers are input responses by input request key, used instead of
	// the default refusals (to reach a deeper, accepting path).
	Answers map[string]json.RawMessage
	// MaxRequests bounds the requests sent, those that end the paused
	// flows included; 0 means DefaultMaxRequests.
	MaxRequests int
	// Rate is the least time between two requests; 0 means none.
	Rate time.Duration
	// Wait is how long the expired check waits before it retries a state;
	// 0 skips the check.
	Wait time.Duration
	// Timeout bounds the wait for each answer; 0 means DefaultTimeout.
	Timeout time.Duration
	// Sleep waits d or until ctx ends; nil means a real timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now returns the time; nil means time.Now.
	Now func() time.Time
}

// errBudget marks a request the budget did not allow.
var errBudget = errors.New("the request budget ran out")

// errTimedOut marks a request whose answer did not come within
// Options.Timeout.
var errTimedOut = errors.New("no answer")

// The pausable methods besides tools/call.
const (
	methodPrompt   = "prompts/get"
	methodResource = "resources/read"
)

// tool is a tool (or, for the moved check, a prompt or resource) the
// checks can pause.
type tool struct {
	method string // "" for tools/call, else methodPrompt or methodResource
	name   string // the tool or prompt name, or the resource URI
	args   map[string]any
	schema json.RawMessage
	first  Outcome // its first pause
	honest Outcome // the honest retry of that pause
}

// label names tl in a report: a tool by its name, a prompt or resource
// with its method.
func (tl *tool) label() string {
	if tl.method == "" {
		return tl.name
	}
	return tl.method + " " + tl.name
}

// request returns tl's method and params with args, and with state and
// answers when resume is set.
func (tl *tool) request(args map[string]any, resume bool, state any, answers map[string]json.RawMessage) (string, map[string]any) {
	m := map[string]any{"_meta": meta()}
	method := tl.method
	switch method {
	case methodResource:
		m["uri"] = tl.name
	case methodPrompt:
		m["name"] = tl.name
		if len(args) > 0 {
			m["arguments"] = args
		}
	default:
		method = "tools/call"
		m["name"] = tl.name
		m["arguments"] = args
	}
	if resume {
		m["requestState"] = state
		m["inputResponses"] = answers
	}
	return method, m
}

type prober struct {
	t     Target
	o     Options
	stdio bool // t.Stdio()
	id    int64
	sent  int
	// cleanup counts the requests of sent that ended a paused flow;
	// ending is set while end sends them.
	cleanup int
	ending  bool
	last    time.Time
	tools   []*tool // pausable, the checked one first
	// notPausable is why the last tool tried was not pausable, when
	// discovery found none: the report's Unchecked says it.
	notPausable string
	refs        []refusal
	report      *Report
	// lastMessage is the JSON-RPC response of the last request, if any.
	lastMessage json.RawMessage
	// byFlag holds the checks skipped only because a flag was not given.
	byFlag map[string]bool
	// stop, once set, ends the run: nothing more is sent and Run returns
	// it (a redirect).
	stop error
}

// refusal is one refused altered retry, for error_shape.
type refusal struct {
	check string
	id    int64
	out   Outcome
}

// Run probes the server behind t and returns the report. Each check
// pauses the server once (a fresh call that ends input_required) and,
// after its altered resume, ends that flow: the original state resumed
// honestly (same caller, tool and arguments) with every input request
// declined, again while the server pauses (a few rounds at most), so
// that a server holding something per paused call (a bridging proxy's
// child process) holds nothing once the check is done. That clean-up is
// not judged; its requests are counted apart, in Report.Cleanup.
//
// An error means
// the probe could not start (the server did not answer tools/list, or Tool
// did not pause); a check that cannot run is skipped with a reason.
//
// A redirect (HTTPTarget follows none) ends the run with its
// *RedirectError.
func Run(ctx context.Context, t Target, opts *Options) (*Report, error) {
	p := &prober{t: t, stdio: t.Stdio(), report: &Report{}, byFlag: map[string]bool{}}
	if opts != nil {
		p.o = *opts
	}
	if p.o.MaxRequests <= 0 {
		p.o.MaxRequests = DefaultMaxRequests
	}
	if p.o.Timeout <= 0 {
		p.o.Timeout = DefaultTimeout
	}
	if p.o.Sleep == nil {
		p.o.Sleep = sleep
	}
	if p.o.Now == nil {
		p.o.Now = time.Now
	}
	defer func() { p.report.Requests, p.report.Cleanup = p.sent-p.cleanup, p.cleanup }()
	err := p.run(ctx)
	if p.stop != nil {
		return nil, p.stop
	}
	if err != nil {
		return nil, err
	}
	if p.report.Unchecked == "" {
		for _, n := range Essential {
			if c := p.report.Get(n); c.Verdict == Warn || (c.Verdict == Skip && !p.byFlag[n]) {
				p.report.Incomplete = append(p.report.Incomplete, n)
			}
		}
	}
	return p.report, nil
}

func (p *prober) run(ctx context.Context) error {
	listed, legacy, err := p.era(ctx)
	if err != nil {
		return err
	}
	if legacy {
		p.report.Era = LegacyVersion
		p.skipAll("the server speaks " + LegacyVersion + ": its tools ask for input with server-to-client requests inside a session and cannot pause, so there is no requestState to check (mrtr proxy bridges such a server to " + ModernVersion + " and seals its pauses)")
		return nil
	}
	p.report.Era = ModernVersion
	if err := p.discover(ctx, listed); err != nil {
		return err
	}
	if len(p.tools) == 0 {
		why := "no tool paused twice the same way with a requestState (input_required without a state has nothing to check); name one with --tool"
		if p.notPausable != "" {
			why += " (the last tried: " + p.notPausable + ")"
		}
		p.skipAll(why)
		return nil
	}
	p.report.Tool = p.tools[0].name
	for _, o := range p.tools[1:] {
		p.report.Others = append(p.report.Others, o.name)
	}
	p.checks(ctx)
	return nil
}

// skipAll reports that nothing could be checked, and why: once, in
// Report.Unchecked; each check is skipped pointing there.
func (p *prober) skipAll(why string) {
	p.report.Unchecked = why
	for _, n := range Names {
		p.add(n, Skip, "nothing could be checked (see unchecked)")
	}
}

func (p *prober) add(name string, v Verdict, detail string) {
	p.report.Checks = append(p.report.Checks, Check{Name: name, Verdict: v, Detail: detail})
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// send sends one request within the budget and the rate, and reduces its
// answer.
func (p *prober) send(ctx context.Context, caller Caller, version, method, name string, params any) (Outcome, int64) {
	if p.stop != nil {
		return Outcome{Kind: KindNone, Err: p.stop}, 0
	}
	if p.sent >= p.o.MaxRequests {
		return Outcome{Kind: KindNone, Err: errBudget}, 0
	}
	if p.o.Rate > 0 && !p.last.IsZero() {
		if err := p.o.Sleep(ctx, p.last.Add(p.o.Rate).Sub(p.o.Now())); err != nil {
			return Outcome{Kind: KindNone, Err: err}, 0
		}
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return Outcome{Kind: KindNone, Err: err}, 0
	}
	p.id++
	p.sent++
	if p.ending {
		p.cleanup++
	}
	id := p.id
	rctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	rep, err := p.t.Send(rctx, caller, &Request{ID: id, Method: method, Name: name, Version: version, Params: raw})
	p.last = p.o.Now()
	p.lastMessage = nil
	if err == nil {
		p.lastMessage = rep.Message
	}
	if err != nil && rctx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("%w within %v", errTimedOut, p.o.Timeout)
	}
	if re := (*RedirectError)(nil); errors.As(err, &re) {
		p.stop = err
	}
	return outcomeOf(rep, err, id), id
}

// meta is the 2026-07-28 per-request envelope the probe sends.
func meta() map[string]any {
	return map[string]any{
		"io.modelcontextprotocol/protocolVersion": ModernVersion,
		"io.modelcontextprotocol/clientInfo":      map[string]any{"name": "mrtr-probe", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{
			"elicitation": map[string]any{}, "sampling": map[string]any{}, "roots": map[string]any{},
		},
	}
}

// era finds whether the server speaks 2026-07-28 as the spec's client
// era detection does (over HTTP a modern tools/list first, on stdio
// server/discover) and returns the listed tools.
func (p *prober) era(ctx context.Context) (listed []listedTool, legacy bool, err error) {
	if p.stdio {
		modern, err := p.discoverEra(ctx)
		if err != nil || !modern {
			return nil, !modern, err
		}
	}
	var cursor string
	for page := 0; page < 20; page++ {
		params := map[string]any{"_meta": meta()}
		if cursor != "" {
			params["cursor"] = cursor
		}
		out, _ := p.send(ctx, Primary, ModernVersion, "tools/list", "", params)
		if out.Kind == KindNone && out.Err != nil {
			return nil, false, fmt.Errorf("tools/list: %w", out.Err)
		}
		if out.Kind == KindError || out.Kind == KindHTTP {
			if page == 0 && !p.stdio && p.isLegacy(ctx, out) {
				return nil, true, nil
			}
			return nil, false, fmt.Errorf("tools/list (%s): %s", ModernVersion, out.String())
		}
		tools, next, err := p.lastTools()
		if err != nil {
			return nil, false, err
		}
		listed = append(listed, tools...)
		if next == "" {
			return listed, false, nil
		}
		cursor = next
	}
	return listed, false, nil
}

// listedTool is one entry of tools/list.
type listedTool struct {
	Name        string          `json:"name"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// lastTools decodes the tools of the last tools/list answer.
func (p *prober) lastTools() ([]listedTool, string, error) {
	var m struct {
		Result struct {
			Tools      []listedTool `json:"tools"`
			NextCursor string       `json:"nextCursor"`
		} `json:"result"`
	}
	if err := json.Unmarshal(p.lastMessage, &m); err != nil {
		return nil, "", fmt.Errorf("tools/list: decode the result: %w", err)
	}
	return m.Result.Tools, m.Result.NextCursor, nil
}

// isLegacy reports whether out, the answer to a modern tools/list, comes
// from a 2025-11-25 server: an unsupported-version error that does not
// list 2026-07-28, or a server that instead answers initialize.
func (p *prober) isLegacy(ctx context.Context, out Outcome) bool {
	if out.Kind == KindError && out.Code == -32022 {
		return true
	}
	params := map[string]any{
		"protocolVersion": LegacyVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "mrtr-probe", "version": "1"},
	}
	init, _ := p.send(ctx, Primary, "", "initialize", "", params)
	if init.Kind != KindComplete {
		return false
	}
	var m struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	return json.Unmarshal(p.lastMessage, &m) == nil && m.Result.ProtocolVersion != "" && m.Result.ProtocolVersion != ModernVersion
}

// discoverEra asks a stdio server server/discover with the 2026-07-28
// _meta: a DiscoverResult listing 2026-07-28 means modern; anything else
// (an error, another result, no answer within Options.Timeout) legacy. A
// server whose output ends first has not answered at all: an error.
func (p *prober) discoverEra(ctx context.Context) (modern bool, err error) {
	out, _ := p.send(ctx, Primary, ModernVersion, "server/discover", "", map[string]any{"_meta": meta()})
	switch {
	case out.Kind == KindNone && errors.Is(out.Err, errTimedOut):
		return false, nil
	case out.Kind == KindNone && out.Err != nil:
		return false, fmt.Errorf("server/discover: %w", out.Err)
	case out.Kind != KindComplete:
		return false, nil
	}
	var m struct {
		Result struct {
			SupportedVersions []string `json:"supportedVersions"`
		} `json:"result"`
	}
	if json.Unmarshal(p.lastMessage, &m) != nil {
		return false, nil
	}
	return slices.Contains(m.Result.SupportedVersions, ModernVersion), nil
}
