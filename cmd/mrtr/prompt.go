package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/mail"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// prompter answers a server's elicitations with a person at a terminal.
// Every answer is read through one bufio.Reader, so input typed or piped
// ahead of a prompt is never lost between prompts.
//
// A prompter is safe for concurrent use: go-sdk fulfils the input
// requests of one round concurrently, and each elicitation holds the
// terminal until it is answered.
type prompter struct {
	in   *bufio.Reader
	out  io.Writer
	echo bool // show each answer read, as a terminal would: stdin is not one

	mu      sync.Mutex
	pending chan readResult // a read left in flight by a prompt whose ctx ended
	closed  bool
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

// elicit asks the person for params and returns their answer. The end
// of input means cancel. It returns an error only when ctx ends, stdin
// fails, or the schema is not an elicitation schema at all.
func (p *prompter) elicit(ctx context.Context, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("no more questions: the call is over")
	}

	msg := printable(params.Message)
	if params.Mode == "url" || (params.Mode == "" && params.URL != "") {
		if msg != "" {
			fmt.Fprintf(p.out, "\n%s\n", msg)
		}
		fmt.Fprintf(p.out, "The server asks you to open this URL:\n  %s\n", printable(params.URL))
		action, err := p.action(ctx, "Open it? [Y]es (accept) / [n]o (decline) / [c]ancel: ")
		if err != nil {
			return nil, err
		}
		return &mcp.ElicitResult{Action: action}, nil
	}

	fields, err := parseElicitSchema(params.RequestedSchema)
	if err != nil {
		return nil, err
	}
	if msg == "" {
		msg = "The server asks for input."
	}
	fmt.Fprintf(p.out, "\n%s\n", msg)
	action, err := p.action(ctx, "Answer? [Y]es / [n]o (decline) / [c]ancel: ")
	if err != nil {
		return nil, err
	}
	if action != actionAccept {
		return &mcp.ElicitResult{Action: action}, nil
	}
	content := map[string]any{}
	for _, f := range fields {
		v, set, err := p.field(ctx, f)
		if errors.Is(err, io.EOF) {
			return &mcp.ElicitResult{Action: actionCancel}, nil
		}
		if err != nil {
			return nil, err
		}
		if set {
			content[f.name] = v
		}
	}
	return &mcp.ElicitResult{Action: actionAccept, Content: content}, nil
}

// close waits for the elicitation in progress, if any, and refuses the
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
		case "n", "no":
			return actionDecline, nil
		case "c", "cancel":
			return actionCancel, nil
		}
		fmt.Fprintln(p.out, "  please answer y (yes), n (no: decline) or c (cancel)")
	}
}

// field prompts for one field until the input is valid. set is false
// for an optional field left empty.
func (p *prompter) field(ctx context.Context, f *field) (v any, set bool, err error) {
	fmt.Fprint(p.out, f.describe())
	for {
		fmt.Fprint(p.out, f.inputPrompt())
		line, err := p.readLine(ctx)
		if err != nil {
			return nil, false, err
		}
		v, set, problem := f.parse(line)
		if problem == "" {
			return v, set, nil
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

// field is one property of a requested schema, ready to prompt for.
type field struct {
	name, title, desc string
	kind              string
	required          bool
	def               any // the schema default; meaningful if hasDef
	hasDef            bool
	choices           []choice

	min, max, exclMin, exclMax *float64
	minLen, maxLen             *int
	minItems, maxItems         *int
	pattern                    *regexp.Regexp
	format                     string
}

type choice struct {
	value any
	label string // a title, or "" for a bare enum value
}

// schemaJSON is the part of JSON Schema an elicitation may use: a flat
// object of primitive properties (MCP 2025-06-18 and later).
type schemaJSON struct {
	Type        any                    `json:"type"`
	Title       string                 `json:"title"`
	Description string                 `json:"description"`
	Default     json.RawMessage        `json:"default"`
	Enum        []any                  `json:"enum"`
	EnumNames   []any                  `json:"enumNames"`
	Const       json.RawMessage        `json:"const"`
	OneOf       []*schemaJSON          `json:"oneOf"`
	AnyOf       []*schemaJSON          `json:"anyOf"`
	Items       *schemaJSON            `json:"items"`
	Properties  map[string]*schemaJSON `json:"properties"`
	Required    []string               `json:"required"`

	Minimum          *float64        `json:"minimum"`
	Maximum          *float64        `json:"maximum"`
	ExclusiveMinimum json.RawMessage `json:"exclusiveMinimum"` // a number since draft 6, a boolean before
	ExclusiveMaximum json.RawMessage `json:"exclusiveMaximum"`
	MinLength        *int            `json:"minLength"`
	MaxLength        *int            `json:"maxLength"`
	MinItems         *int            `json:"minItems"`
	MaxItems         *int            `json:"maxItems"`
	Pattern          string          `json:"pattern"`
	Format           string          `json:"format"`
}

// parseElicitSchema returns the fields of a requested schema in prompt
// order: required ones in the order the schema lists them, then the
// optional ones by name. (The schema arrives as a Go map, so its own
// property order is gone.)
func parseElicitSchema(schema any) ([]*field, error) {
	if schema == nil {
		return nil, nil
	}
	data, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("requested schema: %w", err)
	}
	var s schemaJSON
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("requested schema: %w", err)
	}
	var fields []*field
	seen := map[string]bool{}
	for _, name := range s.Required {
		if ps, ok := s.Properties[name]; ok && !seen[name] {
			seen[name] = true
			fields = append(fields, newField(name, ps, true))
		}
	}
	var rest []string
	for name := range s.Properties {
		if !seen[name] {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	for _, name := range rest {
		fields = append(fields, newField(name, s.Properties[name], false))
	}
	return fields, nil
}

func newField(name string, s *schemaJSON, required bool) *field {
	if s == nil {
		s = &schemaJSON{}
	}
	f := &field{
		name: name, title: printable(s.Title), desc: printable(s.Description), required: required,
		min: s.Minimum, max: s.Maximum, exclMin: number(s.ExclusiveMinimum), exclMax: number(s.ExclusiveMaximum),
		minLen: s.MinLength, maxLen: s.MaxLength, minItems: s.MinItems, maxItems: s.MaxItems,
		format: s.Format,
	}
	if len(s.Default) > 0 && json.Unmarshal(s.Default, &f.def) == nil && f.def != nil {
		f.hasDef = true
	}
	if s.Pattern != "" {
		// JSON Schema patterns are ECMA-262; one RE2 cannot compile is left
		// to the server to check.
		f.pattern, _ = regexp.Compile(s.Pattern)
	}
	typ := typeName(s.Type)
	switch {
	case typ == "array":
		f.kind = kindChoices
		if s.Items != nil {
			f.choices = choicesOf(s.Items)
		}
	default:
		f.choices = choicesOf(s)
		if len(f.choices) > 0 {
			f.kind = kindChoice
		} else if typ == kindNumber || typ == kindInteger || typ == kindBoolean {
			f.kind = typ
		} else {
			f.kind = kindString
		}
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

// number decodes a numeric keyword, nil for anything else (such as the
// boolean exclusiveMinimum of draft 4).
func number(raw json.RawMessage) *float64 {
	var x float64
	if len(raw) == 0 || json.Unmarshal(raw, &x) != nil {
		return nil
	}
	return &x
}

// choicesOf reads the three enum shapes: enum (with the legacy
// enumNames), and oneOf or anyOf of {const, title}.
func choicesOf(s *schemaJSON) []choice {
	var cs []choice
	if len(s.Enum) > 0 {
		for i, v := range s.Enum {
			c := choice{value: v}
			if i < len(s.EnumNames) {
				c.label = printable(fmt.Sprint(s.EnumNames[i]))
			}
			cs = append(cs, c)
		}
		return cs
	}
	for _, alt := range append(slices.Clone(s.OneOf), s.AnyOf...) {
		if alt == nil || len(alt.Const) == 0 {
			continue
		}
		var v any
		if json.Unmarshal(alt.Const, &v) != nil {
			continue
		}
		cs = append(cs, choice{value: v, label: printable(alt.Title)})
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
		v := printable(valueString(c.value))
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
	var facts []string
	switch f.kind {
	case kindChoice:
		facts = append(facts, "choose one: number or value")
	case kindChoices:
		if len(f.choices) > 0 {
			facts = append(facts, "choose any: numbers or values, comma-separated")
		} else {
			facts = append(facts, "list, comma-separated")
		}
	default:
		facts = append(facts, f.kind)
	}
	if f.required {
		facts = append(facts, "required")
	} else {
		facts = append(facts, "optional")
	}
	num := func(op string, x *float64) {
		if x != nil {
			facts = append(facts, op+" "+strconv.FormatFloat(*x, 'g', -1, 64))
		}
	}
	num(">=", f.min)
	num(">", f.exclMin)
	num("<=", f.max)
	num("<", f.exclMax)
	count := func(what string, x *int) {
		if x != nil {
			facts = append(facts, fmt.Sprintf(what, *x))
		}
	}
	count("at least %d characters", f.minLen)
	count("at most %d characters", f.maxLen)
	count("at least %d chosen", f.minItems)
	count("at most %d chosen", f.maxItems)
	if f.format != "" {
		facts = append(facts, "format "+printable(f.format))
	}
	if f.pattern != nil {
		facts = append(facts, "pattern "+printable(f.pattern.String()))
	}
	return facts
}

// inputPrompt is the line the answer is typed on.
func (f *field) inputPrompt() string {
	if f.kind == kindBoolean {
		hint := "y/n"
		if d, ok := f.def.(bool); ok && f.hasDef {
			hint = map[bool]string{true: "Y/n", false: "y/N"}[d]
		}
		return f.name + " [" + hint + "]: "
	}
	if f.hasDef {
		return f.name + " [" + oneLine(printable(valueString(f.def))) + "]: "
	}
	return f.name + ": "
}

// parse turns one line of input into the field's value. set is false for
// an optional field left empty; a non-empty problem says why the input
// was refused.
func (f *field) parse(line string) (v any, set bool, problem string) {
	s := strings.TrimSpace(line)
	if s == "" || (f.kind == kindChoices && strings.Trim(s, ", \t") == "") {
		switch {
		case f.hasDef:
			return f.def, true, ""
		case f.required:
			return nil, false, "a value is required"
		}
		return nil, false, ""
	}
	switch f.kind {
	case kindBoolean:
		switch strings.ToLower(s) {
		case "y", "yes", "true":
			return true, true, ""
		case "n", "no", "false":
			return false, true, ""
		}
		return nil, false, "please answer y or n"
	case kindInteger:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			x, ferr := strconv.ParseFloat(s, 64)
			if ferr != nil || x != math.Trunc(x) || math.Abs(x) > 1<<53 {
				return nil, false, fmt.Sprintf("%q is not an integer", s)
			}
			n = int64(x)
		}
		if p := f.checkRange(float64(n)); p != "" {
			return nil, false, p
		}
		return n, true, ""
	case kindNumber:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, false, fmt.Sprintf("%q is not a number", s)
		}
		if p := f.checkRange(x); p != "" {
			return nil, false, p
		}
		return x, true, ""
	case kindChoice:
		v, ok := f.pick(s)
		if !ok {
			return nil, false, f.choiceProblem(s)
		}
		return v, true, ""
	case kindChoices:
		var vs []any
		for tok := range strings.SplitSeq(s, ",") {
			tok = strings.TrimSpace(tok)
			if tok == "" {
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
		if f.minItems != nil && len(vs) < *f.minItems {
			return nil, false, fmt.Sprintf("choose at least %d", *f.minItems)
		}
		if f.maxItems != nil && len(vs) > *f.maxItems {
			return nil, false, fmt.Sprintf("choose at most %d", *f.maxItems)
		}
		return vs, true, ""
	}
	// A string keeps its inner spaces; only the ends are trimmed.
	n := utf8.RuneCountInString(s)
	switch {
	case f.minLen != nil && n < *f.minLen:
		return nil, false, fmt.Sprintf("must be at least %d characters", *f.minLen)
	case f.maxLen != nil && n > *f.maxLen:
		return nil, false, fmt.Sprintf("must be at most %d characters", *f.maxLen)
	case f.pattern != nil && !f.pattern.MatchString(s):
		return nil, false, fmt.Sprintf("must match the pattern %s", printable(f.pattern.String()))
	}
	if p := checkFormat(f.format, s); p != "" {
		return nil, false, p
	}
	return s, true, ""
}

func (f *field) checkRange(x float64) string {
	g := func(p *float64) string { return strconv.FormatFloat(*p, 'g', -1, 64) }
	switch {
	case f.min != nil && x < *f.min:
		return "must be at least " + g(f.min)
	case f.max != nil && x > *f.max:
		return "must be at most " + g(f.max)
	case f.exclMin != nil && x <= *f.exclMin:
		return "must be greater than " + g(f.exclMin)
	case f.exclMax != nil && x >= *f.exclMax:
		return "must be less than " + g(f.exclMax)
	}
	return ""
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
	return fmt.Sprintf("%q is not one of the choices: answer 1 to %d or a value", printable(s), len(f.choices))
}

// checkFormat checks the formats MCP allows, lightly: the server has the
// last word.
func checkFormat(format, s string) string {
	switch format {
	case "email":
		if a, err := mail.ParseAddress(s); err != nil || a.Address != s {
			return "must be an email address, like name@example.com"
		}
	case "uri":
		if u, err := url.Parse(s); err != nil || u.Scheme == "" {
			return "must be an absolute URI, like https://example.com/"
		}
	case "date":
		if _, err := time.Parse(time.DateOnly, s); err != nil {
			return "must be a date, like 2026-07-28"
		}
	case "date-time":
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			return "must be a date and time, like 2026-07-28T09:30:00Z"
		}
	}
	return ""
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

// printable drops control characters (terminal escape sequences among
// them) and bidirectional overrides from server-chosen text before it
// reaches the terminal; newlines and tabs stay.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == utf8.RuneError {
			return -1
		}
		return r
	}, s)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}
