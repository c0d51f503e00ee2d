package adaptertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/internal/testing/fakeclock"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// Config is what the suite hands an adapter's Start for one server.
type Config struct {
	Guard  *mrtr.Guard
	Logger *slog.Logger // for the adapter (and its transport, if it logs)
	Probe  *Probe
}

// Start runs an MCP server built with the adapter under test, over
// loopback HTTP, and returns its base URL. It registers, in its SDK's
// idiom, the fixtures this package documents, serves them anonymously at
// base+"/mcp" and with a bearer token "<issuer>|<subject>" (see
// ParseToken) at base+"/auth/mcp", both for 2026-07-28 and 2025-11-25
// clients, and stops with the test.
//
// The fixtures:
//
//   - tool deploy {service, env}, continuation {service, env}: a first call
//     pauses with an input request under key "confirm" (an elicitation,
//     form mode, ConfirmSchema) sealing its arguments. A resumed call
//     calls Probe.Resumed with whether its flow holds a verified
//     elicitation answer under a key, returns its error as a handler error
//     (a Go error), asks "confirm" again when it is missing, answers an isError result on anything but accept
//     with approve true, and otherwise the text
//     "deployed <service> to <env> (flow <flow id>)".
//   - tool forever {}: pauses every call, asking "confirm".
//   - tool sample {}: with a verified sampling answer under "q" whose
//     content is text T, the text "model said T"; otherwise pauses asking
//     "q", a sampling request (no tools).
//   - tool delete {id: int64}: resumed, the text "deleted"; otherwise
//     pauses asking "confirm".
//   - tool raw {}, registered on the SDK's server directly, bypassing the
//     adapter: returns an input_required result asking "confirm" with the
//     hand-written requestState "step=1".
//   - prompt context_prompt: with a verified accepted elicitation under
//     "user_context" holding content.context X, one user message with text
//     "context: X"; otherwise pauses asking "user_context" with
//     continuation "context".
//   - resource test://secret: with a verified accepted elicitation under
//     "confirm", text contents "secret 42"; otherwise pauses asking
//     "confirm" with continuation 42.
type Start func(t *testing.T, c Config) string

// Probe is how the fixtures report to the suite. Safe for concurrent use.
type Probe struct {
	Runs atomic.Int32 // resumed deploy calls
	fail atomic.Bool
	mu   sync.Mutex
	seen []string
}

// Saw records an answer key a resumed deploy found verified.
func (p *Probe) Saw(key string) {
	p.mu.Lock()
	p.seen = append(p.seen, key)
	p.mu.Unlock()
}

// FailNext makes the next resumed deploy fail.
func (p *Probe) FailNext() { p.fail.Store(true) }

// ErrBackendDown is the handler error of a resumed deploy after FailNext.
var ErrBackendDown = errors.New("deployment backend down")

// Resumed is what a resumed deploy reports first: it counts the run,
// records which of "confirm" and "extra" has reports a verified answer
// (Saw), and returns ErrBackendDown, once, after FailNext: the handler
// returns it.
func (p *Probe) Resumed(has func(key string) bool) error {
	p.Runs.Add(1)
	for _, k := range []string{"confirm", "extra"} {
		if has(k) {
			p.Saw(k)
		}
	}
	if p.fail.CompareAndSwap(true, false) {
		return ErrBackendDown
	}
	return nil
}

func (p *Probe) saw() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.seen, ",")
}

// ParseToken reads the suite's bearer tokens, "<issuer>|<subject>".
func ParseToken(tok string) (reqstate.Principal, bool) {
	iss, sub, ok := strings.Cut(tok, "|")
	if !ok || sub == "" {
		return reqstate.Principal{}, false
	}
	return reqstate.Principal{Issuer: iss, Subject: sub}, true
}

// Hint is the guess fixture's (and a client test's) answer to guess g of
// secret: "higher", "lower", or "" when right.
func Hint(secret, g int) string {
	switch {
	case g < secret:
		return "higher"
	case g > secret:
		return "lower"
	}
	return ""
}

// ConfirmSchema is the requested schema of the "confirm" elicitation.
func ConfirmSchema() map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{"approve": map[string]any{"type": "boolean"}}, "required": []string{"approve"}}
}

// ContextSchema is the requested schema of the "user_context" elicitation.
func ContextSchema() map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{"context": map[string]any{"type": "string"}}}
}

// env is one server of a case.
type env struct {
	t     *testing.T
	base  string
	clk   *fakeclock.Clock
	probe *Probe
	logs  *SyncBuffer
}

type options struct {
	guard mrtr.Options
	ring  *reqstate.KeyRing
	clk   *fakeclock.Clock
	logs  *SyncBuffer
}

func start(t *testing.T, run Start, o options) *env {
	t.Helper()
	if o.ring == nil {
		var err error
		if o.ring, err = reqstate.GenerateKeyRing("test", nil); err != nil {
			t.Fatal(err)
		}
	}
	if o.clk == nil {
		o.clk = fakeclock.New(time.Now())
	}
	if o.logs == nil {
		o.logs = &SyncBuffer{}
	}
	log := slog.New(slog.NewTextHandler(o.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	gopts := o.guard
	gopts.Now = o.clk.Now
	gopts.Logger = log
	if gopts.Store == useMemory {
		gopts.Store = replay.NewMemory(&replay.MemoryOptions{Now: o.clk.Now})
	}
	e := &env{t: t, clk: o.clk, probe: &Probe{}, logs: o.logs}
	e.base = run(t, Config{Guard: mrtr.New(reqstate.New(o.ring, nil), &gopts), Logger: log, Probe: e.probe})
	return e
}

// useMemory in options.guard.Store asks for a memory store on the case's clock.
var useMemory replay.Store = replay.NewMemory(nil)

func (e *env) client(path, token string) *Client {
	return &Client{URL: e.base + path, Token: token}
}

var prodArgs = map[string]any{"service": "api", "env": "production"}

func accept(content map[string]any) map[string]any {
	return map[string]any{"confirm": map[string]any{"action": "accept", "content": content}}
}

// pauseDeploy runs round 1 of deploy and returns the sealed state.
func pauseDeploy(t *testing.T, c *Client, args map[string]any) string {
	t.Helper()
	r := c.Call(t, "tools/call", map[string]any{"name": "deploy", "arguments": args})
	reqs, _ := r.Result["inputRequests"].(map[string]any)
	if r.Error != nil || r.Result["resultType"] != "input_required" || r.State() == "" || reqs["confirm"] == nil {
		t.Fatalf("round 1 did not pause: %v", r)
	}
	return r.State()
}

func resume(tok string, args map[string]any, answers map[string]any) map[string]any {
	return map[string]any{"name": "deploy", "arguments": args, "requestState": tok, "inputResponses": answers}
}

// wantReject checks a JSON-RPC error of the error contract, as a client
// on the 2026-07-28 wire gets it.
func wantReject(t *testing.T, what string, r Response, reason mrtr.Reason) {
	t.Helper()
	if r.Error == nil || r.Error.Code != mrtr.CodeInvalidParams || r.Error.Message != mrtr.RejectMessage || r.Error.Reason() != string(reason) {
		t.Fatalf("%s: %v, want -32602 %q reason %s", what, r, mrtr.RejectMessage, reason)
	}
}

// Front says where a front end legitimately differs from an adapter
// inside an SDK's server; the zero value is an adapter. The table states
// each difference it allows, so none weakens a case.
type Front struct {
	// RejectStatus is the HTTP status of the error contract's -32602
	// answers on the 2026-07-28 wire (a rejected requestState, bad
	// inputResponses); 0 means 400, as go-sdk and mcp-go send them. The
	// proxy answers them itself with 200, as a JSON-RPC error.
	RejectStatus int
	// SealsServerState: the front end seals every requestState its
	// server sets (the proxy, in front of a server that sets plain
	// states), so the raw fixture's hand-set state leaves sealed instead
	// of being refused.
	SealsServerState bool
	// RefusesFoldedNames: the front end refuses, with HTTP 400 and
	// -32600, a body naming a protocol member in another case
	// ("RequestState", or "requeſtState" with the long s): the proxy
	// cannot know whether its upstream decodes names exactly or folded.
	// An adapter's guard judges what its SDK decoded, which is folded.
	RefusesFoldedNames bool
}

func (fe Front) rejectStatus() int {
	if fe.RejectStatus == 0 {
		return 400
	}
	return fe.RejectStatus
}

// Run runs the guard's whole contract against servers from start: the
// table of cases every adapter passes, over raw JSON-RPC on loopback HTTP.
func Run(t *testing.T, run Start) { RunFront(t, run, Front{}) }

// RunFront is Run for a front end that differs from an adapter as fe says.
func RunFront(t *testing.T, run Start, fe Front) {
	cases := []struct {
		name string
		f    func(*testing.T, Start, Front)
	}{
		{"TamperEveryByte", tamperEveryByte},
		{"MovedTokens", movedTokens},
		{"ArgumentsExpiryAndRounds", argumentsExpiryAndRounds},
		{"SingleUseConcurrentResumes", singleUseConcurrentResumes},
		{"HandlerErrorReleasesToken", handlerErrorReleasesToken},
		{"UnaskedAnswersDropped", unaskedAnswersDropped},
		{"CapabilityGate", capabilityGate},
		{"HandSetStateRefused", handSetStateRefused},
		{"NullInputResponses", nullInputResponses},
		{"NonStringState", nonStringState},
		{"InexactNumberArguments", inexactNumberArguments},
		{"StoreOutage", storeOutage},
		{"PromptAndResource", promptAndResource},
		{"NoTokenInLogs", noTokenInLogs},
		{"AuditTrail", auditTrail},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.f(t, run, fe) })
	}
}

func tamperEveryByte(t *testing.T, run Start, fe Front) {
	e := start(t, run, options{})
	c := e.client("/mcp", "")
	tok := pauseDeploy(t, c, prodArgs)
	ans := accept(map[string]any{"approve": true})
	for i := range len(tok) {
		b := []byte(tok)
		b[i] ^= 0x20
		if b[i] < 0x21 || b[i] > 0x7e {
			b[i] = '~'
		}
		wantReject(t, fmt.Sprintf("byte %d flipped", i), c.Call(t, "tools/call", resume(string(b), prodArgs, ans)), mrtr.ReasonInvalid)
	}
	wantReject(t, "suffix", c.Call(t, "tools/call", resume(tok+"-TAMPERED", prodArgs, ans)), mrtr.ReasonInvalid)
	wantReject(t, "truncated", c.Call(t, "tools/call", resume(tok[:len(tok)-1], prodArgs, ans)), mrtr.ReasonInvalid)
	if n := e.probe.Runs.Load(); n != 0 {
		t.Fatalf("a tampered token reached the handler %d times", n)
	}
	// The untouched token still works.
	if r := c.Call(t, "tools/call", resume(tok, prodArgs, ans)); !strings.HasPrefix(r.Text(), "deployed api to production") {
		t.Fatalf("untouched token: %v", r)
	}
}

func movedTokens(t *testing.T, run Start, fe Front) {
	ring, err := reqstate.GenerateKeyRing("shared", nil)
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, run, options{ring: ring})
	alice := e.client("/auth/mcp", "https://id.example|alice")
	tok := pauseDeploy(t, alice, prodArgs)
	ans := accept(map[string]any{"approve": true})
	deploy := resume(tok, prodArgs, ans)

	legacy := e.client("/auth/mcp", "https://id.example|alice")
	legacy.Initialize(t, "2025-11-25", map[string]any{"elicitation": map[string]any{}})
	other := start(t, run, options{ring: ring, guard: mrtr.Options{ServerID: "other"}})

	for _, c := range []struct {
		name   string
		client *Client
		method string
		params map[string]any
	}{
		{"other tool", alice, "tools/call", map[string]any{"name": "forever", "arguments": map[string]any{}, "requestState": tok, "inputResponses": ans}},
		{"prompt", alice, "prompts/get", map[string]any{"name": "context_prompt", "requestState": tok, "inputResponses": ans}},
		{"resource", alice, "resources/read", map[string]any{"uri": "test://secret", "requestState": tok, "inputResponses": ans}},
		{"other subject", e.client("/auth/mcp", "https://id.example|mallory"), "tools/call", deploy},
		{"other issuer", e.client("/auth/mcp", "https://evil.example|alice"), "tools/call", deploy},
		{"anonymous", e.client("/mcp", ""), "tools/call", deploy},
		{"other server id", other.client("/auth/mcp", "https://id.example|alice"), "tools/call", deploy},
		{"other protocol version", legacy, "tools/call", deploy},
	} {
		r := c.client.Call(t, c.method, c.params)
		if c.client == legacy {
			// Before 2026-07-28 errors travel with HTTP 200.
			if r.Error == nil || r.Error.Code != mrtr.CodeInvalidParams || r.Error.Reason() != "invalid" {
				t.Fatalf("%s: %v, want -32602 reason invalid", c.name, r)
			}
			continue
		}
		wantReject(t, c.name, r, mrtr.ReasonInvalid)
		if r.Status != fe.rejectStatus() {
			t.Errorf("%s: HTTP %d, want %d", c.name, r.Status, fe.rejectStatus())
		}
	}
	if n := e.probe.Runs.Load() + other.probe.Runs.Load(); n != 0 {
		t.Fatalf("a moved token reached the handler %d times", n)
	}
	if r := alice.Call(t, "tools/call", deploy); !strings.HasPrefix(r.Text(), "deployed api to production") {
		t.Fatalf("rightful resume: %v", r)
	}
}

func argumentsExpiryAndRounds(t *testing.T, run Start, fe Front) {
	e := start(t, run, options{guard: mrtr.Options{MaxRounds: 2, TTL: time.Minute, AnonymousTTL: time.Minute}})
	c := e.client("/mcp", "")
	ans := accept(map[string]any{"approve": true})
	tok := pauseDeploy(t, c, prodArgs)

	wantReject(t, "changed arguments", c.Call(t, "tools/call", resume(tok, map[string]any{"service": "api", "env": "staging"}, ans)), mrtr.ReasonArgumentsChanged)

	e.clk.Advance(time.Minute + mrtr.DefaultLeeway + time.Second)
	wantReject(t, "expired", c.Call(t, "tools/call", resume(tok, prodArgs, ans)), mrtr.ReasonExpired)
	e.clk.Advance(-2 * time.Hour) // now the token looks issued in the future
	wantReject(t, "issued in the future", c.Call(t, "tools/call", resume(tok, prodArgs, ans)), mrtr.ReasonExpired)
	e.clk.Advance(2 * time.Hour)

	// forever pauses every round: rounds 1 and 2 are sealed, the third
	// pause is refused.
	r := c.Call(t, "tools/call", map[string]any{"name": "forever", "arguments": map[string]any{}})
	for i := 0; r.Error == nil && i < 5; i++ {
		if r.State() == "" {
			t.Fatalf("forever did not pause: %v", r)
		}
		r = c.Call(t, "tools/call", map[string]any{"name": "forever", "arguments": map[string]any{}, "requestState": r.State(), "inputResponses": ans})
	}
	wantReject(t, "third pause", r, mrtr.ReasonRoundsExceeded)
	if e.probe.Runs.Load() != 0 {
		t.Fatalf("a refused token reached the handler")
	}
}

func singleUseConcurrentResumes(t *testing.T, run Start, fe Front) {
	e := start(t, run, options{guard: mrtr.Options{Store: useMemory}})
	c := e.client("/mcp", "")
	tok := pauseDeploy(t, c, prodArgs)
	var ok, replayed atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			r := c.Call(t, "tools/call", resume(tok, prodArgs, accept(map[string]any{"approve": true})))
			switch {
			case r.Error == nil && strings.HasPrefix(r.Text(), "deployed"):
				ok.Add(1)
			case r.Error != nil && r.Error.Reason() == "replayed":
				replayed.Add(1)
			default:
				t.Errorf("unexpected: %v", r)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 || replayed.Load() != 31 || e.probe.Runs.Load() != 1 {
		t.Fatalf("ok %d replayed %d handler runs %d; want 1, 31, 1", ok.Load(), replayed.Load(), e.probe.Runs.Load())
	}
}

func handlerErrorReleasesToken(t *testing.T, run Start, fe Front) {
	e := start(t, run, options{guard: mrtr.Options{Store: useMemory}})
	c := e.client("/mcp", "")
	tok := pauseDeploy(t, c, prodArgs)
	params := resume(tok, prodArgs, accept(map[string]any{"approve": true}))
	e.probe.FailNext()
	// A handler error is an isError result (go-sdk) or a JSON-RPC error
	// (mcp-go), as each SDK sends one; either way the token is released.
	if r := c.Call(t, "tools/call", params); r.Error == nil && r.Result["isError"] != true {
		t.Fatalf("failing handler: %v", r)
	}
	if r := c.Call(t, "tools/call", params); !strings.HasPrefix(r.Text(), "deployed") {
		t.Fatalf("retry after a handler error: %v", r)
	}
	wantReject(t, "third use", c.Call(t, "tools/call", params), mrtr.ReasonReplayed)
}

func unaskedAnswersDropped(t *testing.T, run Start, fe Front) {
	e := start(t, run, options{})
	c := e.client("/mcp", "")
	tok := pauseDeploy(t, c, prodArgs)
	answers := accept(map[string]any{"approve": true})
	answers["extra"] = map[string]any{"action": "accept", "content": map[string]any{"approve": true}}
	if r := c.Call(t, "tools/call", resume(tok, prodArgs, answers)); !strings.HasPrefix(r.Text(), "deployed") {
		t.Fatalf("resume with an extra answer: %v", r)
	}
	if got := e.probe.saw(); got != "confirm" {
		t.Fatalf("handler saw answers %q, want only confirm", got)
	}
	// A missing answer makes the handler ask again, not fail.
	r := c.Call(t, "tools/call", resume(tok, prodArgs, map[string]any{"other": map[string]any{"action": "accept"}}))
	if r.Error != nil || r.Result["resultType"] != "input_required" || r.State() == "" || r.State() == tok {
		t.Fatalf("missing answer: %v", r)
	}
	// Answers without any requestState reach no verified view.
	r = c.Call(t, "tools/call", map[string]any{"name": "deploy", "arguments": prodArgs, "inputResponses": accept(map[string]any{"approve": true})})
	if r.Error != nil || r.Result["resultType"] != "input_required" {
		t.Fatalf("unsolicited answers on a first call: %v", r)
	}
}

func capabilityGate(t *testing.T, run Start, fe Front) {
	e := start(t, run, options{})
	c := e.client("/mcp", "")
	c.Caps = map[string]any{}
	r := c.Call(t, "tools/call", map[string]any{"name": "deploy", "arguments": prodArgs})
	if r.Error == nil || r.Error.Code != -32021 || !strings.Contains(string(r.Error.Data), `"requiredCapabilities":{"elicitation":{"form":{}}}`) {
		t.Fatalf("deploy without elicitation: %v", r)
	}
	if r.Status != 400 {
		t.Errorf("-32021: HTTP %d, want 400", r.Status)
	}
	c.Caps = map[string]any{"elicitation": map[string]any{"url": map[string]any{}}}
	r = c.Call(t, "tools/call", map[string]any{"name": "deploy", "arguments": prodArgs})
	if r.Error == nil || r.Error.Code != -32021 || !strings.Contains(string(r.Error.Data), `"form"`) {
		t.Fatalf("form elicitation for a url-only client: %v", r)
	}
	c.Caps = map[string]any{"elicitation": map[string]any{}}
	r = c.Call(t, "tools/call", map[string]any{"name": "sample", "arguments": map[string]any{}})
	if r.Error == nil || r.Error.Code != -32021 || !strings.Contains(string(r.Error.Data), `"requiredCapabilities":{"sampling":{}}`) {
		t.Fatalf("sample without sampling: %v", r)
	}
	c.Caps = map[string]any{"sampling": map[string]any{}}
	r = c.Call(t, "tools/call", map[string]any{"name": "sample", "arguments": map[string]any{}})
	if r.Error != nil || r.State() == "" {
		t.Fatalf("sample with sampling: %v", r)
	}
	r = c.Call(t, "tools/call", map[string]any{"name": "sample", "arguments": map[string]any{}, "requestState": r.State(),
		"inputResponses": map[string]any{"q": map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "Paris"}}}})
	if r.Text() != "model said Paris" {
		t.Fatalf("sample resumed: %v", r)
	}
}

func handSetStateRefused(t *testing.T, run Start, fe Front) {
	e := start(t, run, options{})
	r := e.client("/mcp", "").Call(t, "tools/call", map[string]any{"name": "raw", "arguments": map[string]any{}})
	if fe.SealsServerState {
		// The server's own state leaves sealed, never as it set it.
		if r.Error != nil || r.Result["resultType"] != "input_required" || !strings.HasPrefix(r.State(), "v1.") || strings.Contains(r.String(), "step=1") {
			t.Fatalf("raw state through a sealing front end: %v", r)
		}
		return
	}
	if r.Error == nil || r.Error.Code != mrtr.CodeInternalError || !strings.Contains(r.Error.Message, "requestState") || strings.Contains(r.String(), "step=1") {
		t.Fatalf("raw state: %v", r)
	}
}

func nullInputResponses(t *testing.T, run Start, fe Front) {
	e := start(t, run, options{})
	c := e.client("/mcp", "")
	for _, v := range []any{nil, map[string]any{}} {
		r := c.Call(t, "tools/call", map[string]any{"name": "deploy", "arguments": prodArgs, "inputResponses": v})
		if r.Status != fe.rejectStatus() || r.Error == nil || r.Error.Code != mrtr.CodeInvalidParams || r.Error.Message == mrtr.RejectMessage {
			t.Fatalf("inputResponses %v: %v, want HTTP %d -32602", v, r, fe.rejectStatus())
		}
	}
	// The wire error of a forged token, as a non-Go client sees it.
	r := c.Call(t, "tools/call", resume("v1.test.AAAA", prodArgs, accept(map[string]any{"approve": true})))
	wantReject(t, "forged token", r, mrtr.ReasonInvalid)
	if r.Status != fe.rejectStatus() {
		t.Fatalf("forged token: HTTP %d, want %d", r.Status, fe.rejectStatus())
	}
}

// nonStringState: a requestState member that is not a string (only
// strings are tokens) is refused as invalid by the error contract, as a
// forged token is, never as a header mismatch or a parse error of the SDK
// underneath; a null one is no state, as an absent one: a first call.
func nonStringState(t *testing.T, run Start, fe Front) {
	e := start(t, run, options{})
	c := e.client("/mcp", "")
	tok := pauseDeploy(t, c, prodArgs)
	for _, v := range []any{5, true, map[string]any{"s": tok}, []any{tok}} {
		p := resume(tok, prodArgs, accept(map[string]any{"approve": true}))
		p["requestState"] = v
		r := c.Call(t, "tools/call", p)
		wantReject(t, fmt.Sprintf("requestState %v", v), r, mrtr.ReasonInvalid)
		if r.Status != fe.rejectStatus() {
			t.Fatalf("requestState %v: HTTP %d, want %d", v, r.Status, fe.rejectStatus())
		}
	}
	// The same under a name the SDKs' decoders fold to requestState, alone
	// in the body or beside the exact name.
	for _, name := range []string{"RequestState", "REQUESTSTATE", "requeſtState"} {
		for _, exact := range []bool{false, true} {
			p := resume(tok, prodArgs, accept(map[string]any{"approve": true}))
			if !exact {
				delete(p, "requestState")
			}
			p[name] = 5
			what := fmt.Sprintf("%s 5 (exact name too: %v)", name, exact)
			r := c.Call(t, "tools/call", p)
			if fe.RefusesFoldedNames {
				if r.Status != http.StatusBadRequest || r.Error == nil || r.Error.Code != mcpwire.CodeInvalidRequest {
					t.Fatalf("%s: HTTP %d %v, want 400 -32600", what, r.Status, r)
				}
				continue
			}
			wantReject(t, what, r, mrtr.ReasonInvalid)
			if r.Status != fe.rejectStatus() {
				t.Fatalf("%s: HTTP %d, want %d", what, r.Status, fe.rejectStatus())
			}
		}
	}
	// The token itself was never spent by those.
	if r := c.Call(t, "tools/call", resume(tok, prodArgs, accept(map[string]any{"approve": true}))); r.Error != nil || r.Result["resultType"] != "complete" {
		t.Fatalf("the intact token after the refusals: %v", r)
	}
}

func inexactNumberArguments(t *testing.T, run Start, fe Front) {
	e := start(t, run, options{})
	c := e.client("/mcp", "")
	call := func(id string, extra map[string]any) Response {
		p := map[string]any{"name": "delete", "arguments": rawJSON(`{"id":` + id + `}`)}
		for k, v := range extra {
			p[k] = v
		}
		return c.Call(t, "tools/call", p)
	}
	wantInvalid := func(what string, r Response) {
		t.Helper()
		if r.Error == nil || r.Error.Code != mrtr.CodeInvalidParams || !strings.Contains(r.Error.Message, "more precision than an IEEE 754 double") ||
			strings.Contains(r.Error.Message, "123456789") || r.Error.Message == mrtr.RejectMessage {
			t.Fatalf("%s: %v, want -32602 naming the rule", what, r)
		}
	}
	wantInvalid("first call", call("1234567890123456789", nil))
	r := call("1234567890123456800", nil)
	if r.State() == "" {
		t.Fatalf("1234567890123456800 did not pause: %v", r)
	}
	ans := accept(map[string]any{"approve": true})
	wantInvalid("resume", call("1234567890123456789", map[string]any{"requestState": r.State(), "inputResponses": ans}))
	if r := call("1234567890123456800", map[string]any{"requestState": r.State(), "inputResponses": ans}); r.Text() != "deleted" {
		t.Fatalf("resume with the sealed id: %v", r)
	}
}

// downStore is a single-use store that cannot answer.
type downStore struct{}

func (downStore) Reserve(context.Context, string, time.Time) (replay.Reservation, error) {
	return nil, errors.New("dial tcp 127.0.0.1:6379: connection refused")
}

func storeOutage(t *testing.T, run Start, fe Front) {
	e := start(t, run, options{guard: mrtr.Options{Store: downStore{}}})
	c := e.client("/mcp", "")
	tok := pauseDeploy(t, c, prodArgs) // a first call needs no store
	r := c.Call(t, "tools/call", resume(tok, prodArgs, accept(map[string]any{"approve": true})))
	// The caller learns the store is down and to try again (as /readyz
	// tells anyone), never the cause: no address, no Redis error.
	if r.Error == nil || r.Error.Code != mrtr.CodeInternalError || r.Error.Message != "the single-use store is unavailable; try again" || len(r.Error.Data) > 0 {
		t.Fatalf("store down: %v, want -32603 naming the store, without the cause", r)
	}
	if e.probe.Runs.Load() != 0 {
		t.Fatalf("the handler ran without the store")
	}
}

func promptAndResource(t *testing.T, run Start, fe Front) {
	e := start(t, run, options{guard: mrtr.Options{Store: useMemory}})
	c := e.client("/mcp", "")
	r := c.Call(t, "prompts/get", map[string]any{"name": "context_prompt"})
	if r.State() == "" || r.Result["resultType"] != "input_required" {
		t.Fatalf("prompt did not pause: %v", r)
	}
	params := map[string]any{"name": "context_prompt", "requestState": r.State(),
		"inputResponses": map[string]any{"user_context": map[string]any{"action": "accept", "content": map[string]any{"context": "ctx"}}}}
	r = c.Call(t, "prompts/get", params)
	msgs, _ := r.Result["messages"].([]any)
	if len(msgs) != 1 || !strings.Contains(fmt.Sprint(msgs[0]), "context: ctx") {
		t.Fatalf("prompt resumed: %v", r)
	}
	wantReject(t, "prompt replayed", c.Call(t, "prompts/get", params), mrtr.ReasonReplayed)

	r = c.Call(t, "resources/read", map[string]any{"uri": "test://secret"})
	if r.State() == "" || r.Result["resultType"] != "input_required" {
		t.Fatalf("resource did not pause: %v", r)
	}
	tok := r.State()
	wantReject(t, "resource tampered", c.Call(t, "resources/read", map[string]any{"uri": "test://secret", "requestState": tok + "x",
		"inputResponses": accept(map[string]any{"approve": true})}), mrtr.ReasonInvalid)
	r = c.Call(t, "resources/read", map[string]any{"uri": "test://secret", "requestState": tok, "inputResponses": accept(map[string]any{"approve": true})})
	contents, _ := r.Result["contents"].([]any)
	if len(contents) != 1 || !strings.Contains(fmt.Sprint(contents[0]), "secret 42") {
		t.Fatalf("resource resumed: %v", r)
	}
}

func noTokenInLogs(t *testing.T, run Start, fe Front) {
	logs := &SyncBuffer{}
	e := start(t, run, options{logs: logs, guard: mrtr.Options{Store: useMemory, TTL: time.Minute, AnonymousTTL: time.Minute}})
	c := e.client("/mcp", "")
	tok := pauseDeploy(t, c, prodArgs)
	ans := accept(map[string]any{"approve": true})
	b := []byte(tok)
	b[len(b)/2] ^= 1
	c.Call(t, "tools/call", resume(string(b), prodArgs, ans))                             // invalid
	c.Call(t, "tools/call", resume(tok, map[string]any{"service": "x", "env": "y"}, ans)) // arguments_changed
	c.Call(t, "tools/call", resume(tok, prodArgs, ans))                                   // ok
	c.Call(t, "tools/call", resume(tok, prodArgs, ans))                                   // replayed
	c.Call(t, "tools/call", map[string]any{"name": "raw", "arguments": map[string]any{}}) // hand-set
	e.clk.Advance(2 * time.Minute)
	c.Call(t, "tools/call", resume(tok, prodArgs, ans)) // expired
	out := logs.String()
	if !strings.Contains(out, "replayed") {
		t.Fatalf("the guard logged no rejection; the check below would prove nothing:\n%s", out)
	}
	body := tok[strings.LastIndexByte(tok, '.')+1:]
	for _, s := range []string{tok, string(b), body[:16], body[len(body)-16:], "step=1"} {
		if strings.Contains(out, s) {
			t.Fatalf("the log holds %q of a token:\n%s", s, out)
		}
	}
}

// SyncBuffer is a log destination safe for a server's goroutines.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
