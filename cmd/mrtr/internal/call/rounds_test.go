package call

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// scriptedStep returns a rounds step that answers from script, one entry
// a call: "busy" is input_required without input requests (load
// shedding), "ask" one with a form, "done" the result. It records the
// answers and state each call was sent.
func scriptedStep(script ...string) (step func(mcp.InputResponseMap, string) (mcp.InputRequestMap, string, bool, error), calls *[]string) {
	calls = new([]string)
	n := 0
	return func(resp mcp.InputResponseMap, state string) (mcp.InputRequestMap, string, bool, error) {
		_, answered := resp["q"]
		*calls = append(*calls, state+map[bool]string{true: "+answer", false: ""}[answered])
		if n >= len(script) {
			return nil, "", false, errors.New("called past the script")
		}
		s := script[n]
		n++
		switch s {
		case "busy":
			return nil, "st" + string(rune('0'+n)), true, nil
		case "ask":
			return mcp.InputRequestMap{"q": &mcp.ElicitParams{Message: "?"}}, "st" + string(rune('0'+n)), true, nil
		}
		return nil, "", false, nil
	}, calls
}

func answerAll(_ context.Context, reqs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	resp := mcp.InputResponseMap{}
	for k := range reqs {
		resp[k] = &mcp.ElicitResult{Action: "decline"}
	}
	return resp, nil
}

// TestRoundsBusy pins the client's bound on load shedding: it retries
// maxBusyRounds-1 busy answers in a row (with the same answers and the
// latest state) and gives up on the maxBusyRounds-th; a round with input
// requests starts the count again.
func TestRoundsBusy(t *testing.T) {
	r := &rounds{max: defaultMaxRounds, answer: answerAll}
	step, calls := scriptedStep("busy", "busy", "busy", "done")
	err := r.run(t.Context(), step)
	if err == nil || !strings.Contains(err.Error(), "the server is busy: it asked to retry 3 times in a row") || len(*calls) != maxBusyRounds {
		t.Errorf("three busy answers: %v after %d calls, want the busy error after %d", err, len(*calls), maxBusyRounds)
	}

	step, calls = scriptedStep("busy", "busy", "ask", "busy", "busy", "done")
	if err := r.run(t.Context(), step); err != nil {
		t.Errorf("two busy, a question, two busy: %v, want the count reset by the question", err)
	}
	want := []string{"", "st1", "st2", "st3+answer", "st4+answer", "st5+answer"}
	if strings.Join(*calls, " ") != strings.Join(want, " ") {
		t.Errorf("sent %q, want %q (a busy retry resends the answers with the latest state)", *calls, want)
	}
}

// TestRoundsClientLimit: --max-rounds answers that many rounds and
// refuses the next, naming the client's limit.
func TestRoundsClientLimit(t *testing.T) {
	step, calls := scriptedStep("ask", "ask", "ask")
	err := (&rounds{max: 2, answer: answerAll}).run(t.Context(), step)
	if !errors.Is(err, ErrClientRounds) || !strings.Contains(err.Error(), "a 3rd time, and --max-rounds is 2") || len(*calls) != 3 {
		t.Errorf("%v after %d calls", err, len(*calls))
	}
}

// TestAnswerRootsWithoutRoot: a roots request with no --root is refused
// with what to do, not answered with an empty list (the server would take
// "no roots" for the person's answer).
func TestAnswerRootsWithoutRoot(t *testing.T) {
	in := &inputs{}
	_, err := in.answer(t.Context(), mcp.InputRequestMap{"roots": &mcp.ListRootsParams{}})
	if err == nil || !strings.Contains(err.Error(), `input request "roots": the server asks for roots, but this client offers none (--root URI offers one)`) {
		t.Errorf("%v", err)
	}
	in = &inputs{roots: []*mcp.Root{{URI: "file:///src", Name: "/src"}}}
	resp, err := in.answer(t.Context(), mcp.InputRequestMap{"roots": &mcp.ListRootsParams{}})
	if r, ok := resp["roots"].(*mcp.ListRootsResult); err != nil || !ok || len(r.Roots) != 1 || r.Roots[0].URI != "file:///src" {
		t.Errorf("with --root: %v %#v", err, resp)
	}
}

// TestPickAmbiguous: a choice typed in another case is taken only when
// one choice matches; two that differ only in case (or a value and a
// title) are refused, and the exact value always wins.
func TestPickAmbiguous(t *testing.T) {
	f := parseElicitSchema(map[string]any{"type": "object", "required": []any{"c"}, "properties": map[string]any{
		"c": map[string]any{"type": "string", "oneOf": []any{
			map[string]any{"const": "red", "title": "Red"}, map[string]any{"const": "RED", "title": "Loud red"},
			map[string]any{"const": "g", "title": "Green"}, map[string]any{"const": "b", "title": "G"}}}}})[0]
	for _, tc := range []struct {
		in   string
		want any // nil: refused
	}{
		{"red", "red"}, {"RED", "RED"}, {"Red", nil}, {"rEd", nil},
		{"green", "g"}, {"GREEN", "g"}, {"G", nil}, {"g", "g"}, {"loud RED", "RED"}, {"3", "g"},
	} {
		v, set, problem := f.parse(tc.in)
		switch {
		case tc.want == nil && (set || problem == ""):
			t.Errorf("%q: took %v, want it refused as ambiguous", tc.in, v)
		case tc.want != nil && (!set || v != tc.want):
			t.Errorf("%q: %v (%s), want %v", tc.in, v, problem, tc.want)
		}
	}
}
