package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// discover finds the pausable tools: Options.Tool (and OtherTool), or
// every listed tool in order until one pauses with a state whose honest
// retry is conclusive and a second one pauses too.
func (p *prober) discover(ctx context.Context, listed []listedTool) error {
	schema := func(name string) json.RawMessage {
		for _, l := range listed {
			if l.Name == name {
				return l.InputSchema
			}
		}
		return nil
	}
	if p.o.Tool != "" {
		tl, why := p.try(ctx, p.o.Tool, schema(p.o.Tool), p.o.Args)
		if tl == nil {
			return fmt.Errorf("tool %s %s", p.o.Tool, why)
		}
		p.tools = append(p.tools, tl)
		if p.o.OtherTool != "" {
			ot, why := p.try(ctx, p.o.OtherTool, schema(p.o.OtherTool), nil)
			if ot == nil {
				return fmt.Errorf("tool %s %s", p.o.OtherTool, why)
			}
			p.tools = append(p.tools, ot)
		}
		return nil
	}
	budget := p.o.MaxRequests / 2
	var found []*tool
	for _, l := range listed {
		if p.sent >= budget {
			break
		}
		tl, why := p.try(ctx, l.Name, l.InputSchema, p.o.Args)
		if tl == nil {
			p.notPausable = l.Name + " " + why
			continue
		}
		found = append(found, tl)
		if len(found) >= 2 && slices.ContainsFunc(found, conclusive) {
			break
		}
	}
	if i := slices.IndexFunc(found, conclusive); i > 0 {
		found[0], found[i] = found[i], found[0]
	}
	if len(found) > 2 {
		found = found[:2]
	}
	p.tools = found
	return nil
}

// conclusive reports whether an altered retry of tl can be told from its
// honest retry: the honest retry does not just start over.
func conclusive(tl *tool) bool {
	return !(tl.honest.Kind == KindPause && slices.Equal(tl.honest.Keys(), tl.first.Keys()))
}

// try returns the tool when it is pausable, else nil and why not.
func (p *prober) try(ctx context.Context, name string, schema json.RawMessage, args map[string]any) (*tool, string) {
	tl := &tool{name: name, schema: schema, args: Placeholders(schema)}
	maps.Copy(tl.args, args)
	if why, ok := p.pausable(ctx, tl); !ok {
		return nil, why
	}
	return tl, ""
}

// pausable calls tl twice; when both calls pause with a state and the
// same input requests, it retries the second state honestly, records the
// first pause and that retry in tl and reports true. Otherwise it says
// why tl is not pausable. One pause is not enough: a server may ask
// something once, outside the tool's own flow (a roots/list a fresh
// process sends once), and every check pauses the tool again. The first
// flow is ended before the second call, so the probe never holds two
// paused calls at once: a server may hold something per paused call and
// bound them per caller (mrtr proxy's --max-procs-per-caller, 1 with
// --max-procs below 8), and every probe request is one caller's.
func (p *prober) pausable(ctx context.Context, tl *tool) (string, bool) {
	first := p.pause(ctx, tl, Primary)
	if first.Kind != KindPause || !first.HasState {
		return "did not pause with a requestState: " + first.String(), false
	}
	p.end(ctx, Primary, tl, tl.args, first)
	again := p.pause(ctx, tl, Primary)
	if again.Kind != KindPause || !again.HasState || !slices.Equal(again.Keys(), first.Keys()) {
		p.end(ctx, Primary, tl, tl.args, again)
		return fmt.Sprintf("paused once (%s) but not again the same way (%s)", first.String(), again.String()), false
	}
	tl.first = first
	tl.honest, _ = p.resume(ctx, tl, again.State, again)
	p.end(ctx, Primary, tl, tl.args, tl.honest)
	if tl.honest.Kind == KindNone {
		return "paused, but its honest retry got " + tl.honest.String(), false
	}
	return "", true
}

// pause calls tl without a state.
func (p *prober) pause(ctx context.Context, tl *tool, caller Caller) Outcome {
	method, params := tl.request(tl.args, false, nil, nil)
	out, _ := p.send(ctx, caller, ModernVersion, method, tl.name, params)
	return out
}

// resume retries tl with state and the answers to the requests of the
// pauses given.
func (p *prober) resume(ctx context.Context, tl *tool, state any, paused ...Outcome) (Outcome, int64) {
	return p.resumeAs(ctx, Primary, tl, tl.args, state, paused...)
}

func (p *prober) resumeAs(ctx context.Context, caller Caller, tl *tool, args map[string]any, state any, paused ...Outcome) (Outcome, int64) {
	answers := map[string]json.RawMessage{}
	for _, o := range paused {
		maps.Copy(answers, p.answers(o.Requests))
	}
	method, params := tl.request(args, true, state, answers)
	return p.send(ctx, caller, ModernVersion, method, tl.name, params)
}

// maxEndRounds bounds the resumes that end one paused flow.
const maxEndRounds = 4

// end ends the flow that paused as out, a call of tl with args made as
// caller, so that the server holds nothing for it: it resumes with out's
// own state and a refusal of every input request (declines, whatever
// Options.Answers says), and again while the server pauses, at most
// maxEndRounds times. Anything but a pause with a state ends it at once
// (nothing to resume). What the server answers is not judged; the
// requests are counted in Report.Cleanup.
func (p *prober) end(ctx context.Context, caller Caller, tl *tool, args map[string]any, out Outcome) {
	last := p.lastMessage
	p.ending = true
	defer func() { p.ending, p.lastMessage = false, last }()
	for range maxEndRounds {
		if out.Kind != KindPause || !out.HasState {
			return
		}
		method, params := tl.request(args, true, out.State, refusals(out.Requests))
		out, _ = p.send(ctx, caller, ModernVersion, method, tl.name, params)
	}
}

// answers returns the response to each input request: Options.Answers
// where it has the key, else a refusal (see refusals).
func (p *prober) answers(reqs map[string]json.RawMessage) map[string]json.RawMessage {
	out := refusals(reqs)
	for k := range reqs {
		if a, ok := p.o.Answers[k]; ok {
			out[k] = a
		}
	}
	return out
}

// refusals returns a refusal of each input request: decline for a form,
// a fixed text for sampling, no roots for roots.
func refusals(reqs map[string]json.RawMessage) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(reqs))
	for k, r := range reqs {
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(r, &m)
		switch m.Method {
		case "sampling/createMessage":
			out[k] = json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"(declined by mrtr probe)"},"model":"mrtr-probe","stopReason":"endTurn"}`)
		case "roots/list":
			out[k] = json.RawMessage(`{"roots":[]}`)
		default:
			out[k] = json.RawMessage(`{"action":"decline"}`)
		}
	}
	return out
}

// Placeholders returns arguments for every required property of an input
// schema: an enum's first value, else the default, else a placeholder of
// the property's type.
func Placeholders(schema json.RawMessage) map[string]any {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	args := map[string]any{}
	if json.Unmarshal(schema, &s) != nil {
		return args
	}
	for _, k := range s.Required {
		args[k] = placeholder(s.Properties[k])
	}
	return args
}

// PlaceholderString is the value a required string argument gets.
const PlaceholderString = "mrtr-probe"

func placeholder(prop json.RawMessage) any {
	var p struct {
		Enum    []any           `json:"enum"`
		Default json.RawMessage `json:"default"`
		Type    json.RawMessage `json:"type"`
	}
	if json.Unmarshal(prop, &p) != nil {
		return PlaceholderString
	}
	if len(p.Enum) > 0 {
		return p.Enum[0]
	}
	if len(p.Default) > 0 {
		var v any
		if json.Unmarshal(p.Default, &v) == nil {
			return v
		}
	}
	var typ string
	if json.Unmarshal(p.Type, &typ) != nil {
		var types []string
		_ = json.Unmarshal(p.Type, &types)
		for _, t := range types {
			if t != "null" {
				typ = t
				break
			}
		}
	}
	switch typ {
	case "integer", "number":
		return 1
	case "boolean":
		return false
	case "array":
		return []any{}
	case "object":
		return map[string]any{}
	case "null":
		return nil
	default:
		return PlaceholderString
	}
}

// changed returns args with one value changed: the first argument (by
// name) to another value of its kind, or, without arguments, one added.
func changed(args map[string]any, schema json.RawMessage) (map[string]any, string) {
	out := maps.Clone(args)
	keys := slices.Sorted(maps.Keys(args))
	if len(keys) == 0 {
		out["mrtr_probe"] = "changed"
		return out, `added argument "mrtr_probe"`
	}
	k := keys[0]
	var s struct {
		Properties map[string]struct {
			Enum []any `json:"enum"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(schema, &s)
	if enum := s.Properties[k].Enum; len(enum) > 1 {
		for _, e := range enum {
			if fmt.Sprint(e) != fmt.Sprint(args[k]) {
				out[k] = e
				return out, fmt.Sprintf("%s changed to %v", k, e)
			}
		}
	}
	switch v := args[k].(type) {
	case string:
		out[k] = v + "-changed"
	case bool:
		out[k] = !v
	case float64:
		out[k] = v + 1
	case int:
		out[k] = v + 1
	case json.Number:
		out[k] = v.String() + "1"
		if f, err := v.Float64(); err == nil {
			out[k] = f + 1
		}
	default:
		out[k] = PlaceholderString + "-changed"
	}
	return out, fmt.Sprintf("%s changed", k)
}
