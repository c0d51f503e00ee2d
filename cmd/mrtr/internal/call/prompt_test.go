package call

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// form builds form-mode params the way go-sdk's client hands them over:
// the schema as a map decoded from JSON.
func form(t *testing.T, msg, schema string) *mcp.ElicitParams {
	t.Helper()
	var s map[string]any
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		t.Fatal(err)
	}
	return &mcp.ElicitParams{Mode: "form", Message: msg, RequestedSchema: s}
}

func elicitWith(t *testing.T, params *mcp.ElicitParams, input string) (*mcp.ElicitResult, string) {
	t.Helper()
	var out strings.Builder
	res, err := newPrompter(strings.NewReader(input), &out).elicit(t.Context(), params)
	if err != nil {
		t.Fatalf("elicit: %v\noutput:\n%s", err, out.String())
	}
	return res, out.String()
}

func TestElicitForm(t *testing.T) {
	tests := []struct {
		name    string
		schema  string
		input   string
		action  string
		content map[string]any
		out     []string // substrings of the output, in order
	}{
		{
			name: "every type, required first in schema order then optional by name",
			schema: `{"type":"object","required":["zeta","alpha"],"properties":{
				"alpha":{"type":"integer","title":"Alpha","description":"An integer."},
				"zeta":{"type":"string"},
				"mid":{"type":"number"},
				"bee":{"type":"boolean"}}}`,
			input:   "\nhello world  \n7\ny\n2.5\n",
			action:  "accept",
			content: map[string]any{"zeta": "hello world", "alpha": int64(7), "bee": true, "mid": 2.5},
			out: []string{"Pick things\n(answer :decline to refuse, :cancel or Ctrl-D to dismiss)\n",
				"zeta (string, required)\n", "zeta: ", "a value is required (or :decline, :cancel)\nzeta: ",
				"alpha (integer, required): Alpha\n  An integer.\n", "alpha: ",
				"bee (boolean, optional)\n", "bee [y/n]: ",
				"mid (number, optional)\n", "mid: "},
		},
		{
			name:    "optional fields left empty are omitted",
			schema:  `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"},"c":{"type":"boolean"}}}`,
			input:   "\n\n\n",
			action:  "accept",
			content: map[string]any{},
		},
		{
			name: "defaults shown and used on empty input",
			schema: `{"type":"object","required":["s","n","b","e"],"properties":{
				"s":{"type":"string","default":"bob"},
				"n":{"type":"integer","default":3},
				"b":{"type":"boolean","default":true},
				"e":{"type":"string","enum":["red","green"],"default":"green"},
				"f":{"type":"boolean","default":false}}}`,
			input:   "\n\n\n\n\n",
			action:  "accept",
			content: map[string]any{"s": "bob", "n": float64(3), "b": true, "e": "green", "f": false},
			out:     []string{"s [bob]: ", "n [3]: ", "b [Y/n]: ", "e [green]: ", "f [y/N]: "},
		},
		{
			name: "enum: by number, by value, by title in any case; enumNames, oneOf and anyOf",
			schema: `{"type":"object","required":["a","b","c","d","e"],"properties":{
				"a":{"type":"string","enum":["red","green","blue"]},
				"b":{"type":"string","enum":["s","m","l"],"enumNames":["Small","Medium","Large"]},
				"c":{"type":"string","oneOf":[{"const":"fr","title":"French"},{"const":"de","title":"German"}]},
				"d":{"type":"string","anyOf":[{"const":"x","title":"Ex"},{"const":"y","title":"Why"}]},
				"e":{"type":"string","enum":["red","green"]}}}`,
			input:   "2\nlarge\nGerman\ny\nRED\n",
			action:  "accept",
			content: map[string]any{"a": "green", "b": "l", "c": "de", "d": "y", "e": "red"},
			out: []string{"a (choose one: number or value, required)\n  1) red\n  2) green\n  3) blue\n",
				"  1) Small (s)\n  2) Medium (m)\n  3) Large (l)\n",
				"  1) French (fr)\n  2) German (de)\n", "  1) Ex (x)\n  2) Why (y)\n"},
		},
		{
			name:    "enum: bad choices re-prompt",
			schema:  `{"type":"object","required":["a"],"properties":{"a":{"type":"string","enum":["red","green"]}}}`,
			input:   "\n0\n3\npurple\n1\n",
			action:  "accept",
			content: map[string]any{"a": "red"},
			out: []string{"a: ", `"0" is not one of the choices: answer 1 to 2 or a value`, "a: ",
				`"3" is not one of the choices`, `"purple" is not one of the choices`, "a: "},
		},
		{
			name: "multi-select: items enum and items anyOf, with limits",
			schema: `{"type":"object","required":["tags","langs"],"properties":{
				"tags":{"type":"array","items":{"type":"string","enum":["a","b","c"]},"minItems":2},
				"langs":{"type":"array","items":{"anyOf":[{"const":"go","title":"Go"},{"const":"rs","title":"Rust"}]},"maxItems":1}}}`,
			input:   "\n1\n1, c, 1\ngo,rs\nrust\n",
			action:  "accept",
			content: map[string]any{"tags": []any{"a", "c"}, "langs": []any{"rs"}},
			out:     []string{"choose any: numbers or values, comma-separated, required, at least 2 chosen", "choose at least 2", "choose at most 1"},
		},
		{
			name: "validation retries: integer, number, boolean, limits",
			schema: `{"type":"object","required":["i","n","b","x"],"properties":{
				"i":{"type":"integer","minimum":1,"maximum":100},
				"n":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1},
				"b":{"type":"boolean"},
				"x":{"type":"integer"}}}`,
			input:   "\nabc\n5.5\n0\n101\n1e1\nnope\ninf\n0\n1\n0.25\nmaybe\nNO\n2.0\n",
			action:  "accept",
			content: map[string]any{"i": int64(10), "n": 0.25, "b": false, "x": int64(2)},
			out: []string{"i (integer, required, >= 1, <= 100)", "a value is required", `"abc" is not an integer`,
				`"5.5" is not an integer`, "must be at least 1", "must be at most 100",
				"n (number, required, > 0, < 1)", `"nope" is not a number`, `"inf" is not a number`,
				"must be greater than 0", "must be less than 1", "please answer y or n"},
		},
		{
			name: "validation retries: string length, pattern and formats",
			schema: `{"type":"object","required":["s","p","e","u","d","t"],"properties":{
				"s":{"type":"string","minLength":2,"maxLength":3},
				"p":{"type":"string","pattern":"^[a-z]+$"},
				"e":{"type":"string","format":"email"},
				"u":{"type":"string","format":"uri"},
				"d":{"type":"string","format":"date"},
				"t":{"type":"string","format":"date-time"}}}`,
			input: "x\nwxyz\nxyz\nAB\nab\nnot-an-email\nBob <bob@example.com>\nbob@example.com\n" +
				"example.com\nhttps://example.com/x\n28/07/2026\n2026-07-28\n2026-07-28 09:30\n2026-07-28T09:30:00Z\n",
			action: "accept",
			content: map[string]any{"s": "xyz", "p": "ab", "e": "bob@example.com", "u": "https://example.com/x",
				"d": "2026-07-28", "t": "2026-07-28T09:30:00Z"},
			out: []string{"s (string, required, at least 2 characters, at most 3 characters)",
				"must be at least 2 characters", "must be at most 3 characters", "must match the pattern ^[a-z]+$",
				"must be an email address", "must be an email address", "must be an absolute URI",
				"must be a date, like", "must be a date and time"},
		},
		{
			name: "a multi-select default shows its items",
			schema: `{"type":"object","properties":{"pets":{"type":"array","items":{"enum":["fish-1","cat-2"]},"default":["fish-1"]},
				"tags":{"type":"array","items":{"type":"string"},"default":["a","b"]}}}`,
			input:   "\n\n",
			action:  "accept",
			content: map[string]any{"pets": []any{"fish-1"}, "tags": []any{"a", "b"}},
			out:     []string{"pets [fish-1]: ", "tags [a, b]: "},
		},
		{
			name:   "decline",
			schema: `{"type":"object","properties":{"a":{"type":"string"}}}`,
			input:  ":decline\n",
			action: "decline",
		},
		{
			name:   "cancel at the second field, after a bad answer",
			schema: `{"type":"object","required":["a","b"],"properties":{"a":{"type":"string"},"b":{"type":"integer"}}}`,
			input:  "x\nmaybe\n :CANCEL \n",
			action: "cancel",
			out:    []string{`"maybe" is not an integer`},
		},
		{
			name:   "end of input at the first field cancels",
			schema: `{"type":"object","properties":{"a":{"type":"string"}}}`,
			input:  "",
			action: "cancel",
			out:    []string{"(end of input: cancel)"},
		},
		{
			name:   "end of input in the middle of the fields cancels",
			schema: `{"type":"object","required":["a","b"],"properties":{"a":{"type":"string"},"b":{"type":"string"}}}`,
			input:  "first\n",
			action: "cancel",
		},
		{
			name:    "a last line without a newline still counts",
			schema:  `{"type":"object","required":["a"],"properties":{"a":{"type":"string"}}}`,
			input:   "\r\nlast",
			action:  "accept",
			content: map[string]any{"a": "last"},
		},
		{
			name:    "no schema: just the question, once",
			schema:  `{}`,
			input:   "\n",
			action:  "accept",
			content: map[string]any{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, out := elicitWith(t, form(t, "Pick things", tt.schema), tt.input)
			if res.Action != tt.action {
				t.Fatalf("action %q, want %q\noutput:\n%s", res.Action, tt.action, out)
			}
			if tt.action == "accept" && !reflect.DeepEqual(res.Content, tt.content) {
				t.Fatalf("content %#v, want %#v\noutput:\n%s", res.Content, tt.content, out)
			}
			if tt.action != "accept" && res.Content != nil {
				t.Fatalf("content %#v on %s", res.Content, res.Action)
			}
			rest := out
			for _, want := range tt.out {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Fatalf("output lacks %q (in order)\noutput:\n%s", want, out)
				}
				rest = rest[i+len(want):]
			}
		})
	}
}

func TestElicitURL(t *testing.T) {
	for input, want := range map[string]string{"\n": "accept", "y\n": "accept", "n\n": "decline", "c\n": "cancel", "": "cancel"} {
		res, out := elicitWith(t, &mcp.ElicitParams{Mode: "url", Message: "Sign in", URL: "https://example.com/auth?x=1", ElicitationID: "e1"}, input)
		if res.Action != want || res.Content != nil {
			t.Errorf("input %q: %+v, want %s", input, res, want)
		}
		if !strings.Contains(out, "Sign in\nThe server asks you to open this URL:\n  https://example.com/auth?x=1\nOpen it? [Y]es (accept) / [n]o (decline) / [c]ancel: ") {
			t.Errorf("output:\n%s", out)
		}
	}
}

// One reader serves every prompt: answers piped ahead are not lost.
func TestElicitSharesTheReader(t *testing.T) {
	var out strings.Builder
	p := newPrompter(strings.NewReader("5\n6\n:decline\n"), &out)
	schema := form(t, "guess", `{"type":"object","required":["g"],"properties":{"g":{"type":"integer"}}}`)
	var got []any
	for range 3 {
		res, err := p.elicit(t.Context(), schema)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, res.Action, res.Content["g"])
	}
	want := []any{"accept", int64(5), "accept", int64(6), "decline", nil}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// A prompt whose context ends returns its cause; the line it was waiting
// for goes to the next prompt.
func TestElicitContextEnds(t *testing.T) {
	r, w := io.Pipe()
	var out strings.Builder
	p := newPrompter(r, &out)
	params := form(t, "ok?", `{"type":"object"}`)
	stop := errors.New("stopped")
	ctx, cancel := context.WithCancelCause(t.Context())
	go func() {
		time.Sleep(10 * time.Millisecond)
		cancel(stop)
	}()
	if _, err := p.elicit(ctx, params); !errors.Is(err, stop) {
		t.Fatalf("err %v, want %v", err, stop)
	}
	go w.Write([]byte(":decline\n"))
	res, err := p.elicit(t.Context(), params)
	if err != nil || res.Action != "decline" {
		t.Fatalf("%+v %v, want decline", res, err)
	}
	w.Close()
}

// Server text cannot drive the terminal.
func TestElicitStripsControlCharacters(t *testing.T) {
	params := form(t, "be \x1b[31mred\x1b[0m\u202e", `{"type":"object","required":["a"],"properties":{
		"a":{"type":"string","title":"ti\u0007tle","enum":["v\u009b1"]}}}`)
	_, out := elicitWith(t, params, "1\n")
	if strings.ContainsAny(out, "\x1b\x07\u009b\u202e") || !strings.Contains(out, "be red\n") ||
		!strings.Contains(out, "a (choose one: number or value, required): title\n  1) v\n") {
		t.Fatalf("output %q", out)
	}
}

// Concurrent elicitations of one round take turns at the terminal.
func TestElicitConcurrent(t *testing.T) {
	var out strings.Builder
	p := newPrompter(strings.NewReader("one\ntwo\n"), &out)
	params := form(t, "name?", `{"type":"object","required":["a"],"properties":{"a":{"type":"string"}}}`)
	got := make(chan any, 2)
	for range 2 {
		go func() {
			res, err := p.elicit(t.Context(), params)
			if err != nil {
				got <- err
				return
			}
			got <- res.Content["a"]
		}()
	}
	seen := map[any]bool{<-got: true, <-got: true}
	if !seen["one"] || !seen["two"] {
		t.Fatalf("answers %v", seen)
	}
}

// The :decline / :cancel hint shows once, on the first form, and a form
// is asked field by field with no question before it.
func TestElicitHintOnce(t *testing.T) {
	var out strings.Builder
	p := newPrompter(strings.NewReader("1\n2\n"), &out)
	params := form(t, "guess", `{"type":"object","required":["g"],"properties":{"g":{"type":"integer"}}}`)
	for range 2 {
		if res, err := p.elicit(t.Context(), params); err != nil || res.Action != "accept" {
			t.Fatalf("%+v %v", res, err)
		}
	}
	want := "\nguess\n(answer :decline to refuse, :cancel or Ctrl-D to dismiss)\ng (integer, required)\ng: 1\n" +
		"\nguess\ng (integer, required)\ng: 2\n"
	if out.String() != want {
		t.Fatalf("output %q\nwant   %q", out.String(), want)
	}
}

// A tool's listing (mrtr call URL) names an enum's values, which is what
// --arg takes; "choose one: number or value" is for a prompt, where the
// numbered choices follow.
func TestListFactsShowEnumValues(t *testing.T) {
	fields := parseElicitSchema(form(t, "", `{"type":"object","required":["env"],"properties":{
		"env":{"type":"string","enum":["staging","production"]},
		"size":{"type":"string","enum":["s","l"],"enumNames":["Small","Large"]},
		"hero":{"type":"string","oneOf":[{"const":"hero-1","title":"Superman"},{"const":"hero-2"}]},
		"tags":{"type":"array","items":{"type":"string","enum":["a","b"]},"maxItems":2},
		"n":{"type":"integer","minimum":1}}}`).RequestedSchema)
	got := map[string]string{}
	for _, f := range fields {
		got[f.name] = strings.Join(f.listFacts(), ", ")
	}
	want := map[string]string{
		"env":  "one of: staging, production, required",
		"size": "one of: s (Small), l (Large), optional",
		"hero": "one of: hero-1 (Superman), hero-2, optional",
		"tags": "any of: a, b, optional, at most 2 chosen",
		"n":    "integer, optional, >= 1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("listFacts:\n got %q\nwant %q", got, want)
	}
}

// A field whose name has terminal controls is shown cleaned but answered
// under the name the server sent, once.
func TestElicitKeepsTheServersKey(t *testing.T) {
	name := "n\x1b[2Jame"
	params := &mcp.ElicitParams{Mode: "form", Message: "m", RequestedSchema: map[string]any{"type": "object",
		"required": []any{name}, "properties": map[string]any{name: map[string]any{"type": "string"}}}}
	res, out := elicitWith(t, params, "x\n")
	if res.Action != "accept" || res.Content[name] != "x" || len(res.Content) != 1 || strings.Count(out, "name: ") != 1 || strings.Contains(out, "\x1b") {
		t.Fatalf("%#v\n%q", res, out)
	}
}

// TestLimitsSingular pins issue 30 item 10: a limit of one is singular.
func TestLimitsSingular(t *testing.T) {
	fields := parseElicitSchema(map[string]any{"type": "object", "properties": map[string]any{
		"s": map[string]any{"type": "string", "minLength": 1, "maxLength": 1}}})
	if len(fields) != 1 || strings.Join(fields[0].limits, ", ") != "at least 1 character, at most 1 character" {
		t.Fatalf("limits of a one-character field: %v", fields)
	}
	if _, _, problem := fields[0].parse("ab"); problem != "must be at most 1 character" {
		t.Errorf("two characters for one: %q", problem)
	}
}
