package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// attempt is one altered retry and how it was judged.
type attempt struct {
	what string
	out  Outcome
	j    Judgement
}

func (a attempt) String() string {
	j := a.j.String()
	if a.j == Accepted {
		j = "ACCEPTED"
	}
	return fmt.Sprintf("%s: %s (%s)", a.what, j, a.out.String())
}

// verdictOf is fail when any attempt was accepted, warn when any was
// inconclusive, else pass.
func verdictOf(as []attempt) Verdict {
	v := Pass
	for _, a := range as {
		switch a.j {
		case Accepted:
			return Fail
		case Inconclusive:
			v = Warn
		}
	}
	return v
}

func joinAttempts(as []attempt) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, "; ")
}

const inconclusiveHint = " (inconclusive: the honest retry with these answers starts over too, so --answers with accepting answers makes it conclusive)"

// hint says why as were inconclusive, for the first inconclusive one: the
// honest retry starting over too, failing the same way, or no answer. A
// check that failed needs none: an accepted attempt says enough.
func hint(as ...attempt) string {
	for _, a := range as {
		if a.j != Inconclusive {
			continue
		}
		switch a.out.Kind {
		case KindNone:
			return " (inconclusive: no answer, so nothing says whether the state was refused)"
		case KindError, KindHTTP:
			return " (inconclusive: the honest retry fails the same way, so this failure says nothing about the state)"
		}
		return inconclusiveHint
	}
	return ""
}

// judged records a refusal for error_shape and returns the attempt.
func (p *prober) judged(check, what string, out Outcome, id int64, honest Outcome, first []string) attempt {
	a := attempt{what: what, out: out, j: Judge(out, honest, first)}
	if a.j == Refused && id != 0 {
		p.refs = append(p.refs, refusal{check: check, id: id, out: out})
	}
	return a
}

// fresh pauses the checked tool again, as caller.
func (p *prober) fresh(ctx context.Context, caller Caller) (Outcome, error) {
	tl := p.tools[0]
	out := p.pause(ctx, tl, caller)
	if out.Kind != KindPause || !out.HasState {
		p.end(ctx, caller, tl, tl.args, out)
		if out.Err != nil {
			return out, out.Err
		}
		return out, fmt.Errorf("%s did not pause again: %s", tl.name, out.String())
	}
	return out, nil
}

func (p *prober) checks(ctx context.Context) {
	tl := p.tools[0]
	// The expired check's pause comes first, so that its wait runs
	// alongside the other checks.
	var expiring Outcome
	var expErr error
	var pausedAt time.Time
	if p.o.Wait > 0 {
		expiring, expErr = p.fresh(ctx, Primary)
		pausedAt = p.o.Now()
	}
	p.readable()
	p.tampered(ctx)
	p.moved(ctx)
	p.argumentsChanged(ctx)
	p.replayed(ctx)
	p.anotherCaller(ctx)
	switch {
	case p.o.Wait <= 0:
		p.add(CheckExpired, Skip, "off by default: --wait DURATION, longer than the server's state lifetime, retries a state after it")
	case expErr != nil:
		p.end(ctx, Primary, tl, tl.args, expiring)
		p.add(CheckExpired, Skip, expErr.Error())
	default:
		if err := p.o.Sleep(ctx, pausedAt.Add(p.o.Wait).Sub(p.o.Now())); err != nil {
			p.end(ctx, Primary, tl, tl.args, expiring)
			p.add(CheckExpired, Skip, "interrupted: "+err.Error())
			break
		}
		out, id := p.resume(ctx, tl, expiring.State, expiring)
		p.end(ctx, Primary, tl, tl.args, out)
		a := p.judged(CheckExpired, fmt.Sprintf("retried after %v", p.o.Wait), out, id, tl.honest, expiring.Keys())
		p.add(CheckExpired, verdictOf([]attempt{a}), a.String()+hint(a))
	}
	p.malformed(ctx, CheckOversized, fmt.Sprintf("a %d KiB state", OversizedLen>>10), strings.Repeat("A", OversizedLen))
	p.malformed(ctx, CheckNotAString, `a JSON object as the state`, map[string]any{"mrtr": "probe"})
	p.errorShape()
}

func (p *prober) readable() {
	var warn, pass []string
	for _, tl := range p.tools {
		if how, ok := Readable(tl.first.State, tl.args); ok {
			warn = append(warn, fmt.Sprintf("the state of %s decodes as %s", tl.name, how))
		} else {
			pass = append(pass, fmt.Sprintf("the state of %s (%d characters) decodes into nothing readable", tl.name, len(tl.first.State)))
		}
	}
	if len(warn) > 0 {
		p.add(CheckReadable, Warn, strings.Join(warn, "; "))
		return
	}
	p.add(CheckReadable, Pass, strings.Join(pass, "; ")+" (tried plain text, base64, base64url, JSON)")
}

func (p *prober) tampered(ctx context.Context) {
	tl := p.tools[0]
	var as []attempt
	for _, v := range Variants {
		first, err := p.fresh(ctx, Primary)
		if err != nil {
			p.add(CheckTampered, Skip, err.Error())
			return
		}
		st, ok := v.Alter(first.State)
		if !ok || st == first.State {
			p.end(ctx, Primary, tl, tl.args, first)
			continue
		}
		out, id := p.resume(ctx, tl, st, first)
		p.end(ctx, Primary, tl, tl.args, out)
		p.end(ctx, Primary, tl, tl.args, first)
		as = append(as, p.judged(CheckTampered, v.Name, out, id, tl.honest, first.Keys()))
	}
	if len(as) == 0 {
		p.add(CheckTampered, Skip, "the state is too short to tamper with")
		return
	}
	v := verdictOf(as)
	d := joinAttempts(as)
	if v == Warn {
		d += hint(as...)
	}
	p.add(CheckTampered, v, d)
}

// maxMethodProbes bounds the prompts, and the resources, the moved check
// calls to find one that pauses with a state.
const maxMethodProbes = 5

// moved sends a state where it was not issued: between two pausable
// tools, both ways; between the checked tool and a prompt or resource that
// pauses with a state of its own, both ways; and, when no prompt does, the
// tool's state as prompts/get of a listed prompt.
func (p *prober) moved(ctx context.Context) {
	var as []attempt
	var notes []string
	if len(p.tools) >= 2 {
		as, notes = p.moveBoth(ctx, p.tools[0], p.tools[1])
	}
	mas, mnotes := p.movedMethods(ctx)
	as, notes = append(as, mas...), append(notes, mnotes...)
	if len(as) == 0 {
		var why string
		switch {
		case len(p.tools) >= 2:
			why = "no state could be moved"
		case p.o.Tool != "" && p.o.OtherTool == "":
			why = "--tool without --other-tool: no second pausable tool to move the state to"
			p.byFlag[CheckMoved] = true
		default:
			why = "only one tool paused with a requestState"
		}
		p.add(CheckMoved, Skip, strings.Join(append([]string{why}, notes...), "; "))
		return
	}
	d := joinAttempts(as)
	if len(notes) > 0 {
		d += "; " + strings.Join(notes, "; ")
	}
	v := verdictOf(as)
	if v == Warn {
		d += hint(as...)
	}
	p.add(CheckMoved, v, d)
}

// moveBoth sends a fresh state of a to b and one of b to a, each judged
// against the honest retry of where it went.
func (p *prober) moveBoth(ctx context.Context, a, b *tool) ([]attempt, []string) {
	var as []attempt
	var notes []string
	for _, dir := range [][2]*tool{{a, b}, {b, a}} {
		from, to := dir[0], dir[1]
		src := p.pause(ctx, from, Primary)
		if src.Kind != KindPause || !src.HasState {
			p.end(ctx, Primary, from, from.args, src)
			notes = append(notes, fmt.Sprintf("%s did not pause again: %s", from.label(), src.String()))
			continue
		}
		out, id := p.resumeAs(ctx, Primary, to, to.args, src.State, src, to.first)
		p.end(ctx, Primary, to, to.args, out)
		p.end(ctx, Primary, from, from.args, src)
		as = append(as, p.judged(CheckMoved, fmt.Sprintf("state of %s sent to %s", from.label(), to.label()), out, id, to.honest, to.first.Keys()))
	}
	return as, notes
}

// movedMethods moves states across methods. With a listed prompt (or
// resource) that pauses with a state of its own, the checked tool's state
// goes to it and its state to the tool, judged as between tools. When no
// prompt pauses with a state, the tool's state goes as prompts/get of the
// first listed prompt: only a refusal tells anything there (a prompt that
// issues no state has nothing a state could drive), so anything else is
// a note, not a verdict.
func (p *prober) movedMethods(ctx context.Context) ([]attempt, []string) {
	tl := p.tools[0]
	prompts := p.listed(ctx, methodPrompt)
	var as []attempt
	var notes []string
	promptPauses := false
	for _, cands := range [][]*tool{prompts, p.listed(ctx, methodResource)} {
		for _, c := range cands[:min(len(cands), maxMethodProbes)] {
			if _, ok := p.pausable(ctx, c); !ok {
				continue
			}
			promptPauses = promptPauses || c.method == methodPrompt
			a, n := p.moveBoth(ctx, tl, c)
			as, notes = append(as, a...), append(notes, n...)
			break
		}
	}
	if promptPauses || len(prompts) == 0 {
		return as, notes
	}
	to := prompts[0]
	src := p.pause(ctx, tl, Primary)
	if src.Kind != KindPause || !src.HasState {
		p.end(ctx, Primary, tl, tl.args, src)
		return as, append(notes, fmt.Sprintf("%s did not pause again: %s", tl.label(), src.String()))
	}
	out, id := p.resumeAs(ctx, Primary, to, to.args, src.State, src)
	p.end(ctx, Primary, to, to.args, out)
	p.end(ctx, Primary, tl, tl.args, src)
	what := fmt.Sprintf("state of %s sent to %s", tl.label(), to.label())
	if out.Kind == KindError || out.Kind == KindHTTP {
		return append(as, p.judged(CheckMoved, what, out, id, Outcome{}, nil)), notes
	}
	return as, append(notes, fmt.Sprintf("%s: not refused (%s), but no listed prompt pauses with a state of its own, so a state has nothing to drive there", what, out.String()))
}

// listed returns the prompts (method methodPrompt) or resources
// (methodResource) of the server's first list page, each with
// placeholders for a prompt's required arguments; none when the server
// does not list them.
func (p *prober) listed(ctx context.Context, method string) []*tool {
	list := "prompts/list"
	if method == methodResource {
		list = "resources/list"
	}
	out, _ := p.send(ctx, Primary, ModernVersion, list, "", map[string]any{"_meta": meta()})
	if out.Kind != KindComplete {
		return nil
	}
	var m struct {
		Result struct {
			Prompts []struct {
				Name      string `json:"name"`
				Arguments []struct {
					Name     string `json:"name"`
					Required bool   `json:"required"`
				} `json:"arguments"`
			} `json:"prompts"`
			Resources []struct {
				URI string `json:"uri"`
			} `json:"resources"`
		} `json:"result"`
	}
	if json.Unmarshal(p.lastMessage, &m) != nil {
		return nil
	}
	var ts []*tool
	for _, pr := range m.Result.Prompts {
		args := map[string]any{}
		for _, a := range pr.Arguments {
			if a.Required {
				args[a.Name] = PlaceholderString
			}
		}
		ts = append(ts, &tool{method: methodPrompt, name: pr.Name, args: args})
	}
	for _, r := range m.Result.Resources {
		ts = append(ts, &tool{method: methodResource, name: r.URI})
	}
	return ts
}

func (p *prober) argumentsChanged(ctx context.Context) {
	tl := p.tools[0]
	first, err := p.fresh(ctx, Primary)
	if err != nil {
		p.add(CheckArgumentsChanged, Skip, err.Error())
		return
	}
	args, what := changed(tl.args, tl.schema)
	out, id := p.resumeAs(ctx, Primary, tl, args, first.State, first)
	p.end(ctx, Primary, tl, args, out)
	p.end(ctx, Primary, tl, tl.args, first)
	a := p.judged(CheckArgumentsChanged, "same state, "+what, out, id, tl.honest, first.Keys())
	p.add(CheckArgumentsChanged, verdictOf([]attempt{a}), a.String()+hint(a))
}

func (p *prober) replayed(ctx context.Context) {
	tl := p.tools[0]
	first, err := p.fresh(ctx, Primary)
	if err != nil {
		p.add(CheckReplayed, Skip, err.Error())
		return
	}
	once, _ := p.resume(ctx, tl, first.State, first)
	if once.Kind == KindNone {
		p.end(ctx, Primary, tl, tl.args, first)
		p.add(CheckReplayed, Skip, "the honest retry got "+once.String())
		return
	}
	twice, id := p.resume(ctx, tl, first.State, first)
	// The first resume was honest: the flow it ended (or paused further)
	// needs no more than its own next rounds declined.
	p.end(ctx, Primary, tl, tl.args, once)
	p.end(ctx, Primary, tl, tl.args, twice)
	a := p.judged(CheckReplayed, "the same state twice: first "+once.String()+", then", twice, id, once, first.Keys())
	switch a.j {
	case Refused:
		p.add(CheckReplayed, Pass, a.String())
	case Accepted:
		p.add(CheckReplayed, Warn, a.String()+": the state is multi-use (the spec allows it)")
	default:
		p.add(CheckReplayed, Warn, a.String()+hint(a))
	}
}

func (p *prober) anotherCaller(ctx context.Context) {
	switch {
	case p.stdio:
		p.add(CheckAnotherCaller, Skip, "stdio has one caller: the server is the probe's own process, with no principal (no bearer token) to tell two callers apart")
		return
	case !p.t.HasOther():
		p.add(CheckAnotherCaller, Skip, "needs two callers: --bearer T --bearer-other T2")
		return
	}
	tl := p.tools[0]
	first, err := p.fresh(ctx, Primary)
	if err != nil {
		p.add(CheckAnotherCaller, Skip, err.Error())
		return
	}
	out, id := p.resumeAs(ctx, Other, tl, tl.args, first.State, first)
	p.end(ctx, Other, tl, tl.args, out)
	p.end(ctx, Primary, tl, tl.args, first)
	a := p.judged(CheckAnotherCaller, "the first caller's state sent by the other caller", out, id, tl.honest, first.Keys())
	p.add(CheckAnotherCaller, verdictOf([]attempt{a}), a.String()+hint(a))
}

// malformed sends a state no server issued (state) to the checked tool:
// it must be refused with an error, promptly, and the server must go on
// answering.
func (p *prober) malformed(ctx context.Context, check, what string, state any) {
	tl := p.tools[0]
	if p.sent >= p.o.MaxRequests {
		p.add(check, Skip, errBudget.Error()+" (--max-requests)")
		return
	}
	out, _ := p.resumeAs(ctx, Primary, tl, tl.args, state, tl.first)
	p.end(ctx, Primary, tl, tl.args, out)
	j := Judge(out, tl.honest, tl.first.Keys())
	d := what + ": "
	switch {
	case out.Kind == KindNone:
		p.add(check, Fail, d+out.String())
		return
	case p.serverError(out):
		p.add(check, Fail, d+out.String()+" ("+p.serverErrorWhy(out)+")")
		return
	}
	if alive, _ := p.send(ctx, Primary, ModernVersion, "tools/list", "", map[string]any{"_meta": meta()}); alive.Kind == KindNone && alive.Err != errBudget {
		p.add(check, Fail, d+out.String()+", then the server stopped answering: "+alive.String())
		return
	}
	switch {
	case j == Accepted:
		p.add(check, Fail, d+"ACCEPTED ("+out.String()+")")
	case out.Kind == KindError || out.Kind == KindHTTP:
		p.add(check, Pass, d+"refused ("+out.String()+")")
	case j == Inconclusive:
		p.add(check, Warn, d+out.String()+inconclusiveHint)
	default:
		p.add(check, Warn, d+"refused, but not with an error ("+out.String()+")")
	}
}

// errorShape looks at every refusal of an altered state the checks saw.
// The malformed states of oversized and not_a_string are left out: a
// server may refuse those as malformed requests, before any JSON-RPC
// parsing (HTTP 413, an id it could not read) or with the SDK's own code;
// their checks ask only for an error.
func (p *prober) errorShape() {
	if len(p.refs) == 0 {
		p.add(CheckErrorShape, Skip, "no refusal seen")
		return
	}
	var fails, warns []string
	codes := map[int]bool{}
	for _, r := range p.refs {
		where := r.check + ": "
		switch o := r.out; {
		case o.Kind == KindError && !o.IDOK:
			fails = append(fails, fmt.Sprintf("%serror with id %s, not %d", where, orNone(o.ID), r.id))
		case o.Kind == KindError && p.serverError(o):
			fails = append(fails, fmt.Sprintf("%serror %d (%s)", where, o.Code, p.serverErrorWhy(o)))
		case o.Kind == KindError:
			codes[o.Code] = true
			if o.Code != -32602 {
				warns = append(warns, fmt.Sprintf("%serror %d, not -32602", where, o.Code))
			}
		case o.Kind == KindHTTP && o.Status >= 500:
			fails = append(fails, fmt.Sprintf("%sHTTP %d without a JSON-RPC error", where, o.Status))
		default:
			warns = append(warns, where+"refused as "+o.String()+", not as a JSON-RPC error")
		}
	}
	slices.Sort(warns)
	warns = slices.Compact(warns)
	switch {
	case len(fails) > 0:
		p.add(CheckErrorShape, Fail, strings.Join(append(fails, warns...), "; "))
	case len(warns) > 0:
		p.add(CheckErrorShape, Warn, strings.Join(warns, "; "))
	default:
		p.add(CheckErrorShape, Pass, fmt.Sprintf("%d refusals, every one a JSON-RPC error -32602 with the request's id", len(p.refs)))
	}
}

// serverError reports whether o says the server failed rather than
// refused: over HTTP a 5xx status, on stdio (no status) JSON-RPC's -32603
// Internal error, the same meaning in the only words stdio has.
func (p *prober) serverError(o Outcome) bool {
	if p.stdio {
		return o.Kind == KindError && o.Code == -32603
	}
	return (o.Kind == KindHTTP || o.Kind == KindError) && o.Status >= 500
}

// serverErrorWhy says why serverError(o) holds, for a report.
func (p *prober) serverErrorWhy(o Outcome) string {
	if p.stdio {
		return "-32603 Internal error: a server error, not a refusal"
	}
	return fmt.Sprintf("HTTP %d: a server error, not a refusal", o.Status)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
