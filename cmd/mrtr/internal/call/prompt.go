package call

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/internal/termtext"
)

// prompter answers a server's questions with a person at a terminal.
// Every answer is read through one bufio.Reader, so input typed or piped
// ahead of a prompt is never lost between prompts.
//
// A prompter is safe for concurrent use: each question holds the
// terminal until it is answered.
type prompter struct {
	in   *bufio.Reader
	out  io.Writer
	echo bool // show each answer read, as a terminal would: stdin is not one

	mu      sync.Mutex
	pending chan readResult // a read left in flight by a prompt whose ctx ended
	closed  bool
	hinted  bool // the :decline / :cancel hint was shown
}

type readResult struct {
	line string
	err  error
}

func newPrompter(in io.Reader, out io.Writer) *prompter {
	return &prompter{in: bufio.NewReader(in), out: out, echo: !isTerminal(in)}
}

// isTerminal reports whether r is a character device, such as a
// terminal (or /dev/null, which has nothing to echo).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Elicitation actions (MCP ElicitResult.action).
const (
	actionAccept  = "accept"
	actionDecline = "decline"
	actionCancel  = "cancel"
)

// keyword reads the :decline and :cancel answers that refuse a question.
func keyword(line string) string {
	switch strings.ToLower(strings.TrimSpace(line)) {
	case ":decline", ":d":
		return actionDecline
	case ":cancel", ":c":
		return actionCancel
	}
	return ""
}

func (p *prompter) start() error {
	if p.closed {
		return errors.New("no more questions: the call is over")
	}
	return nil
}

// elicit asks the person for params and returns their answer: the
// fields one after the other, :decline or :cancel at any of them, the
// end of input cancels. It returns an error only when ctx ends or stdin
// fails.
func (p *prompter) elicit(ctx context.Context, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.start(); err != nil {
		return nil, err
	}
	msg := termtext.Clean(params.Message)
	if params.Mode == "url" || (params.Mode == "" && params.URL != "") {
		if msg != "" {
			fmt.Fprintf(p.out, "\n%s\n", msg)
		}
		fmt.Fprintf(p.out, "The server asks you to open this URL:\n  %s\n", termtext.Clean(params.URL))
		action, err := p.action(ctx, "Open it? [Y]es (accept) / [n]o (decline) / [c]ancel: ")
		if err != nil {
			return nil, err
		}
		return &mcp.ElicitResult{Action: action}, nil
	}

	fields := parseElicitSchema(params.RequestedSchema)
	if msg == "" {
		msg = "The server asks for input."
	}
	fmt.Fprintf(p.out, "\n%s\n", msg)
	if !p.hinted && len(fields) > 0 {
		p.hinted = true
		fmt.Fprintln(p.out, "(answer :decline to refuse, :cancel or Ctrl-D to dismiss)")
	}
	content := map[string]any{}
	for _, f := range fields {
		v, set, action, err := p.field(ctx, f)
		if err != nil {
			return nil, err
		}
		if action != "" {
			return &mcp.ElicitResult{Action: action}, nil
		}
		if set {
			content[f.key] = v
		}
	}
	if len(fields) == 0 {
		// Nothing to fill in: the question alone, accept or not.
		action, err := p.action(ctx, "OK? [Y]es / [n]o (decline) / [c]ancel: ")
		if err != nil || action != actionAccept {
			return &mcp.ElicitResult{Action: action}, err
		}
	}
	return &mcp.ElicitResult{Action: actionAccept, Content: content}, nil
}

// close waits for the question in progress, if any, and refuses the
// ones after it: nothing is written to out once close returns.
func (p *prompter) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}

// action asks accept/decline/cancel; an empty answer accepts.
func (p *prompter) action(ctx context.Context, question string) (string, error) {
	for {
		fmt.Fprint(p.out, question)
		line, err := p.readLine(ctx)
		if errors.Is(err, io.EOF) {
			return actionCancel, nil
		}
		if err != nil {
			return "", err
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "", "y", "yes":
			return actionAccept, nil
		case "n", "no", ":decline":
			return actionDecline, nil
		case "c", "cancel", ":cancel":
			return actionCancel, nil
		}
		fmt.Fprintln(p.out, "  please answer y (yes), n (no: decline) or c (cancel)")
	}
}

// field prompts for one field until the input is valid, or the person
// refuses the form (action is then decline or cancel). set is false for
// an optional field left empty.
func (p *prompter) field(ctx context.Context, f *field) (v any, set bool, action string, err error) {
	fmt.Fprint(p.out, f.describe())
	for {
		fmt.Fprint(p.out, f.inputPrompt())
		line, err := p.readLine(ctx)
		if errors.Is(err, io.EOF) {
			return nil, false, actionCancel, nil
		}
		if err != nil {
			return nil, false, "", err
		}
		if k := keyword(line); k != "" {
			return nil, false, k, nil
		}
		v, set, problem := f.parse(line)
		if problem == "" {
			return v, set, "", nil
		}
		fmt.Fprintf(p.out, "  %s\n", problem)
	}
}

// readLine returns the next line without its line ending, io.EOF at the
// end of input (after a last unterminated line), or the cause of ctx's
// end. A read that ctx abandons stays pending for the next prompt, so
// the line it gets is not lost.
func (p *prompter) readLine(ctx context.Context) (string, error) {
	if p.pending == nil {
		ch := make(chan readResult, 1)
		go func() {
			s, err := p.in.ReadString('\n')
			ch <- readResult{s, err}
		}()
		p.pending = ch
	}
	select {
	case r := <-p.pending:
		p.pending = nil
		if r.err != nil && (!errors.Is(r.err, io.EOF) || r.line == "") {
			if errors.Is(r.err, io.EOF) {
				fmt.Fprintln(p.out, "\n(end of input: cancel)")
				return "", io.EOF
			}
			return "", fmt.Errorf("read answer: %w", r.err)
		}
		line := strings.TrimRight(r.line, "\r\n")
		if p.echo {
			fmt.Fprintln(p.out, line)
		}
		return line, nil
	case <-ctx.Done():
		fmt.Fprintln(p.out)
		return "", context.Cause(ctx)
	}
}

// Field kinds. A choice is a single-select enum, choices a multi-select
// (an array of enum values).
const (
	kindString  = "string"
	kindNumber  = "number"
	kindInteger = "integer"
	kindBoolean = "boolean"
	kindChoice  = "choice"
	kindChoices = "choices"
)

// field is one property of a requested schema, ready to prompt for. The
// conversion from typed text is this file's; the checks of the schema's
// keywords (ranges, lengths, patterns, formats, item counts) are
// jsonschema's.
type field struct {
	key               string // the property's name, as the server spelled it: the answer's key
	name, title, desc string // shown: cleaned of terminal controls
	kind              string
	required          bool
	def               any // the schema default; meaningful if hasDef
	hasDef            bool
	choices           []choice
	limits            []string           // the keywords a person should know, described
	schema            *jsonschema.Schema // nil: left to the server to check
}

type choice struct {
	value any
	label string // a title, or "" for a bare enum value
}

// parseElicitSchema returns the fields of a requested schema (a flat
// object of primitive properties, MCP 2025-06-18 and later) in prompt
// order: required ones in the order the schema lists them, then the
// optional ones by name (the schema arrives as a Go map, so its own
// property order is gone).
func parseElicitSchema(schema any) []*field {
	s := asObject(normalize(schema))
	props := asObject(s["properties"])
	var fields []*field
	for _, r := range asArray(s["required"]) {
		name, ok := r.(string)
		if _, has := props[name]; ok && has && !slices.ContainsFunc(fields, func(f *field) bool { return f.key == name }) {
			fields = append(fields, newField(name, asObject(props[name]), true))
		}
	}
	var rest []string
	for name := range props {
		if !slices.ContainsFunc(fields, func(f *field) bool { return f.key == name }) {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	for _, name := range rest {
		fields = append(fields, newField(name, asObject(props[name]), false))
	}
	return fields
}

func asObject(v any) map[string]any { m, _ := v.(map[string]any); return m }

func asArray(v any) []any { a, _ := v.([]any); return a }

// normalize decodes v's JSON as jsonschema does (numbers as json.Number),
// whatever Go values the schema was built from.
func normalize(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	n, _ := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	return n
}

// limitWords describes the keywords a person should know before typing.
var limitWords = []struct{ keyword, format string }{
	{"minimum", ">= %v"}, {"exclusiveMinimum", "> %v"}, {"maximum", "<= %v"}, {"exclusiveMaximum", "< %v"},
	{"minLength", "at least %v characters"}, {"maxLength", "at most %v characters"},
	{"minItems", "at least %v chosen"}, {"maxItems", "at most %v chosen"},
	{"format", "format %v"}, {"pattern", "pattern %v"},
}

func newField(name string, s map[string]any, required bool) *field {
	str := func(k string) string { v, _ := s[k].(string); return termtext.Clean(v) }
	f := &field{key: name, name: termtext.Line(name), title: str("title"), desc: str("description"), required: required}
	if d, ok := s["default"]; ok && d != nil {
		data, _ := json.Marshal(d) // a plain decoding: a number is a float64
		f.hasDef = json.Unmarshal(data, &f.def) == nil
	}
	for _, l := range limitWords {
		switch v := s[l.keyword].(type) {
		case json.Number, string:
			format := l.format
			if v == json.Number("1") {
				format = strings.Replace(format, "characters", "character", 1)
			}
			f.limits = append(f.limits, termtext.Clean(fmt.Sprintf(format, v)))
		}
	}
	switch typ := typeName(s["type"]); {
	case typ == "array":
		f.kind, f.choices = kindChoices, choicesOf(asObject(s["items"]))
	case len(choicesOf(s)) > 0:
		f.kind, f.choices = kindChoice, choicesOf(s)
	case typ == kindNumber || typ == kindInteger || typ == kindBoolean:
		f.kind = typ
	default:
		f.kind = kindString
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if c.AddResource("field.json", s) == nil {
		// A schema jsonschema cannot compile (an ECMA-262 pattern RE2
		// lacks, a draft-4 boolean exclusiveMinimum) is the server's to check.
		f.schema, _ = c.Compile("field.json")
	}
	return f
}

// typeName returns a schema's type, the first non-null one of a list.
func typeName(t any) string {
	switch t := t.(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok && s != "null" {
				return s
			}
		}
	}
	return ""
}

// choicesOf reads the three enum shapes: enum (with the legacy
// enumNames), and oneOf or anyOf of {const, title}.
func choicesOf(s map[string]any) []choice {
	var cs []choice
	if enum := asArray(s["enum"]); len(enum) > 0 {
		names := asArray(s["enumNames"])
		for i, v := range enum {
			c := choice{value: v}
			if i < len(names) {
				c.label = termtext.Clean(fmt.Sprint(names[i]))
			}
			cs = append(cs, c)
		}
		return cs
	}
	for _, alt := range append(asArray(s["oneOf"]), asArray(s["anyOf"])...) {
		alt := asObject(alt)
		if v, ok := alt["const"]; ok {
			title, _ := alt["title"].(string)
			cs = append(cs, choice{value: v, label: termtext.Clean(title)})
		}
	}
	return cs
}

// describe returns the lines that introduce the field: its name, type,
// constraints, title, description and choices.
func (f *field) describe() string {
	var b strings.Builder
	b.WriteString(f.name + " (" + strings.Join(f.facts(), ", ") + ")")
	head, body := f.title, f.desc
	if head == "" {
		head, body = body, ""
	}
	if head != "" {
		b.WriteString(": " + oneLine(head))
	}
	b.WriteString("\n")
	if body != "" {
		b.WriteString(indent(body, "  ") + "\n")
	}
	for i, c := range f.choices {
		v := termtext.Clean(valueString(c.value))
		switch {
		case c.label == "" || c.label == v:
			fmt.Fprintf(&b, "  %d) %s\n", i+1, v)
		default:
			fmt.Fprintf(&b, "  %d) %s (%s)\n", i+1, oneLine(c.label), v)
		}
	}
	return b.String()
}

// facts lists the field's type, whether it is required, and its limits.
func (f *field) facts() []string {
	facts := []string{f.kind}
	switch {
	case f.kind == kindChoice:
		facts[0] = "choose one: number or value"
	case f.kind == kindChoices && len(f.choices) > 0:
		facts[0] = "choose any: numbers or values, comma-separated"
	case f.kind == kindChoices:
		facts[0] = "list, comma-separated"
	}
	if f.required {
		facts = append(facts, "required")
	} else {
		facts = append(facts, "optional")
	}
	return append(facts, f.limits...)
}

// listFacts is facts for a listing of a tool's inputs, where no numbered
// choices follow: a choice shows its values (what --arg takes, each with
// its title if it has one), not how to pick one at a prompt.
func (f *field) listFacts() []string {
	facts := f.facts()
	if len(f.choices) == 0 {
		return facts
	}
	values := make([]string, len(f.choices))
	for i, c := range f.choices {
		v := oneLine(termtext.Clean(valueString(c.value)))
		if c.label != "" && c.label != v {
			v += " (" + oneLine(c.label) + ")"
		}
		values[i] = v
	}
	switch f.kind {
	case kindChoice:
		facts[0] = "one of: " + strings.Join(values, ", ")
	case kindChoices:
		facts[0] = "any of: " + strings.Join(values, ", ")
	}
	return facts
}

// inputPrompt is the line the answer is typed on.
func (f *field) inputPrompt() string {
	if f.kind == kindBoolean {
		hint := "y/n"
		if d, ok := f.def.(bool); ok {
			hint = map[bool]string{true: "Y/n", false: "y/N"}[d]
		}
		return f.name + " [" + hint + "]: "
	}
	if f.hasDef {
		return f.name + " [" + oneLine(termtext.Clean(listString(f.def))) + "]: "
	}
	return f.name + ": "
}

// parse turns one line of input into the field's value. set is false for
// an optional field left empty; a non-empty problem says why the input
// was refused.
func (f *field) parse(line string) (v any, set bool, problem string) {
	s := strings.TrimSpace(line) // a string keeps its inner spaces
	if s == "" || (f.kind == kindChoices && strings.Trim(s, ", \t") == "") {
		switch {
		case f.hasDef:
			return f.def, true, ""
		case f.required:
			return nil, false, "a value is required (or :decline, :cancel)"
		}
		return nil, false, ""
	}
	switch v = s; f.kind {
	case kindBoolean:
		switch strings.ToLower(s) {
		case "y", "yes", "true":
			v = true
		case "n", "no", "false":
			v = false
		default:
			return nil, false, "please answer y or n"
		}
	case kindInteger:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return nil, false, fmt.Sprintf("%q is not an integer", s)
		}
		v = int64(x)
	case kindNumber:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, false, fmt.Sprintf("%q is not a number", s)
		}
		v = x
	case kindChoice:
		var ok bool
		if v, ok = f.pick(s); !ok {
			return nil, false, f.choiceProblem(s)
		}
	case kindChoices:
		var vs []any
		for tok := range strings.SplitSeq(s, ",") {
			if tok = strings.TrimSpace(tok); tok == "" {
				continue
			}
			v, ok := any(tok), true
			if len(f.choices) > 0 {
				v, ok = f.pick(tok)
			}
			if !ok {
				return nil, false, f.choiceProblem(tok)
			}
			if !slices.Contains(vs, v) {
				vs = append(vs, v)
			}
		}
		v = vs
	}
	if f.schema != nil {
		if err := f.schema.Validate(v); err != nil {
			return nil, false, invalid(err)
		}
	}
	return v, true, ""
}

// invalid says in a person's words why jsonschema refused a value.
func invalid(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "not a valid value"
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	r := func(x *big.Rat) string {
		f, _ := x.Float64()
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	switch k := ve.ErrorKind.(type) {
	case *kind.Minimum:
		return "must be at least " + r(k.Want)
	case *kind.Maximum:
		return "must be at most " + r(k.Want)
	case *kind.ExclusiveMinimum:
		return "must be greater than " + r(k.Want)
	case *kind.ExclusiveMaximum:
		return "must be less than " + r(k.Want)
	case *kind.MinLength:
		return "must be at least " + base.Plural(k.Want, "character")
	case *kind.MaxLength:
		return "must be at most " + base.Plural(k.Want, "character")
	case *kind.MinItems:
		return fmt.Sprintf("choose at least %d", k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("choose at most %d", k.Want)
	case *kind.Pattern:
		return "must match the pattern " + termtext.Clean(k.Want)
	case *kind.Format:
		if like, ok := formatExamples[k.Want]; ok {
			return "must be " + like
		}
		return "must be in the format " + termtext.Clean(k.Want)
	}
	return "does not satisfy the schema's " + strings.Join(ve.ErrorKind.KeywordPath(), "/")
}

// formatExamples describes the formats MCP allows.
var formatExamples = map[string]string{
	"email":     "an email address, like name@example.com",
	"uri":       "an absolute URI, like https://example.com/",
	"date":      "a date, like 2026-07-28",
	"date-time": "a date and time, like 2026-07-28T09:30:00Z",
}

// pick resolves a choice by its number, its exact value, or (if only one
// matches) its value or title in any case.
func (f *field) pick(s string) (any, bool) {
	if n, err := strconv.Atoi(s); err == nil && n >= 1 && n <= len(f.choices) {
		return f.choices[n-1].value, true
	}
	for _, c := range f.choices {
		if valueString(c.value) == s {
			return c.value, true
		}
	}
	var found []any
	for _, c := range f.choices {
		if strings.EqualFold(valueString(c.value), s) || (c.label != "" && strings.EqualFold(c.label, s)) {
			found = append(found, c.value)
		}
	}
	if len(found) == 1 {
		return found[0], true
	}
	return nil, false
}

func (f *field) choiceProblem(s string) string {
	return fmt.Sprintf("%q is not one of the choices: answer 1 to %d or a value", termtext.Clean(s), len(f.choices))
}

// listString shows a default: a list as its items, comma-separated.
func listString(v any) string {
	a, ok := v.([]any)
	if !ok {
		return valueString(v)
	}
	items := make([]string, len(a))
	for i, x := range a {
		items[i] = valueString(x)
	}
	return strings.Join(items, ", ")
}

// valueString shows a JSON value: a string as itself, anything else as
// JSON.
func valueString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}

// sample shows a sampling request's messages and takes the person's
// reply as the model's. Refusing it (:decline, :cancel, the end of
// input) is an error: sampling has no decline.
func (p *prompter) sample(ctx context.Context, params *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
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
