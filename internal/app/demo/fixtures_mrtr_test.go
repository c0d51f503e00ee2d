package demo_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/mrtr-go/mrtr"
)

// The SEP-2322 fixtures, driven with raw 2026-07-28 requests shaped like
// the conformance harness's (reference/conformance.md §6).

const elicitTool = "test_input_required_result_elicitation"

func TestElicitationFixture(t *testing.T) {
	ts := start(t, nil, nil)
	alice := map[string]any{"user_name": elicitAnswer(map[string]any{"name": "Alice"})}

	t.Run("A1 round trip", func(t *testing.T) {
		r1 := callRaw(t, ts.url, elicitTool, nil, nil)
		wantInputRequired(t, r1, "user_name")
		if r1.inputMethod("user_name") != "elicitation/create" {
			t.Fatalf("method %q", r1.inputMethod("user_name"))
		}
		r2 := callRaw(t, ts.url, elicitTool, map[string]any{"inputResponses": alice, "requestState": r1.state()}, nil)
		wantComplete(t, r2, "^Hello, Alice!$")
	})
	t.Run("A14 answer without requestState, extra keys ignored", func(t *testing.T) {
		r := callRaw(t, ts.url, elicitTool, map[string]any{"inputResponses": map[string]any{
			"user_name":          elicitAnswer(map[string]any{"name": "Alice"}),
			"unknown_extra_key":  elicitAnswer(map[string]any{"foo": "bar"}),
			"another_unexpected": elicitAnswer(map[string]any{"baz": 123}),
		}}, nil)
		wantComplete(t, r, "^Hello, Alice!$")
	})
	t.Run("A7 wrong key asks again", func(t *testing.T) {
		r := callRaw(t, ts.url, elicitTool, map[string]any{"inputResponses": map[string]any{
			"wrong_key": elicitAnswer(map[string]any{"data": "wrong"}),
		}}, nil)
		wantInputRequired(t, r, "user_name")
	})
	t.Run("verified round with a wrong key asks again", func(t *testing.T) {
		r1 := callRaw(t, ts.url, elicitTool, nil, nil)
		r2 := callRaw(t, ts.url, elicitTool, map[string]any{"inputResponses": map[string]any{
			"wrong_key": elicitAnswer(map[string]any{"name": "Mallory"}),
		}, "requestState": r1.state()}, nil)
		wantInputRequired(t, r2, "user_name")
		if r2.state() == r1.state() {
			t.Fatal("the re-prompt reused the previous requestState")
		}
	})
	t.Run("A15 non-object user_name is not accepted", func(t *testing.T) {
		r := callRaw(t, ts.url, elicitTool, map[string]any{"inputResponses": map[string]any{"user_name": 12345}}, nil)
		if r.Error == nil && r.resultType() != "input_required" {
			t.Fatalf("complete result %v for user_name 12345", r.Result)
		}
	})
	t.Run("A15 inputResponses null is an error", func(t *testing.T) {
		r := callRaw(t, ts.url, elicitTool, map[string]any{"inputResponses": nil}, nil)
		if r.Error == nil {
			t.Fatalf("result %v for inputResponses null, want a JSON-RPC error", r.Result)
		}
	})
	t.Run("malformed answers ask again", func(t *testing.T) {
		for _, ans := range []any{
			elicitAnswer(map[string]any{"name": 12345}),
			elicitAnswer(map[string]any{"name": "  "}),
			elicitAnswer(map[string]any{}),
			map[string]any{"roots": []any{}},
		} {
			r := callRaw(t, ts.url, elicitTool, map[string]any{"inputResponses": map[string]any{"user_name": ans}}, nil)
			if r.Error != nil {
				continue // refused before the handler: as good as asking again
			}
			wantInputRequired(t, r, "user_name")
		}
	})
	t.Run("decline ends the call", func(t *testing.T) {
		r := callRaw(t, ts.url, elicitTool, map[string]any{"inputResponses": map[string]any{"user_name": map[string]any{"action": "decline"}}}, nil)
		wantComplete(t, r, "decline")
		if r.Result["isError"] != true {
			t.Fatal("a declined name is not an isError result")
		}
	})
	t.Run("A10 resultType", func(t *testing.T) {
		if r := callRaw(t, ts.url, elicitTool, nil, nil); r.Result["resultType"] != "input_required" {
			t.Fatalf("resultType %v", r.Result["resultType"])
		}
	})
}

func TestSamplingAndRootsFixtures(t *testing.T) {
	ts := start(t, nil, nil)
	r1 := callRaw(t, ts.url, "test_input_required_result_sampling", nil, nil)
	wantInputRequired(t, r1, "capital_question")
	if r1.inputMethod("capital_question") != "sampling/createMessage" {
		t.Fatalf("method %q", r1.inputMethod("capital_question"))
	}
	r2 := callRaw(t, ts.url, "test_input_required_result_sampling", map[string]any{
		"inputResponses": map[string]any{"capital_question": samplingAnswer}, "requestState": r1.state()}, nil)
	wantComplete(t, r2, "Paris")

	r1 = callRaw(t, ts.url, "test_input_required_result_list_roots", nil, nil)
	wantInputRequired(t, r1, "client_roots")
	if r1.inputMethod("client_roots") != "roots/list" {
		t.Fatalf("method %q", r1.inputMethod("client_roots"))
	}
	r2 = callRaw(t, ts.url, "test_input_required_result_list_roots", map[string]any{
		"inputResponses": map[string]any{"client_roots": rootsAnswer}, "requestState": r1.state()}, nil)
	wantComplete(t, r2, "file:///test/root")

	// These fixtures rely on their sealed round: an answer nobody asked
	// for is not used.
	r := callRaw(t, ts.url, "test_input_required_result_sampling", map[string]any{
		"inputResponses": map[string]any{"capital_question": samplingAnswer}}, nil)
	wantInputRequired(t, r, "capital_question")
}

func TestRequestStateFixtures(t *testing.T) {
	ts := start(t, nil, nil)
	ok := map[string]any{"confirm": elicitAnswer(map[string]any{"ok": true})}
	for _, tool := range []string{"test_input_required_result_request_state", "test_input_required_result_tampered_state"} {
		t.Run(tool, func(t *testing.T) {
			r1 := callRaw(t, ts.url, tool, nil, nil)
			wantInputRequired(t, r1, "confirm")
			// A12: the harness appends a suffix; any change is refused
			// with a JSON-RPC error, never a re-prompt.
			for _, bad := range []string{r1.state() + "-TAMPERED", flip(r1.state(), len(r1.state())/2), "state-ok", r1.state()[:len(r1.state())-4]} {
				wantRawRejected(t, callRaw(t, ts.url, tool, map[string]any{"inputResponses": ok, "requestState": bad}, nil), mrtr.ReasonInvalid)
			}
			r2 := callRaw(t, ts.url, tool, map[string]any{"inputResponses": ok, "requestState": r1.state()}, nil)
			wantComplete(t, r2, "^state-ok: requestState verified .*confirmed=true$")
			// Without the state the answer is not trusted: ask again.
			wantInputRequired(t, callRaw(t, ts.url, tool, map[string]any{"inputResponses": ok}, nil), "confirm")
		})
	}
	// A state sealed for one fixture does not open on another.
	r1 := callRaw(t, ts.url, "test_input_required_result_request_state", nil, nil)
	wantRawRejected(t, callRaw(t, ts.url, "test_input_required_result_tampered_state",
		map[string]any{"inputResponses": ok, "requestState": r1.state()}, nil), mrtr.ReasonInvalid)
}

func TestMultipleInputsFixture(t *testing.T) {
	ts := start(t, nil, nil)
	const tool = "test_input_required_result_multiple_inputs"
	r1 := callRaw(t, ts.url, tool, nil, nil)
	wantInputRequired(t, r1, "client_roots", "greeting", "user_name")
	for k, m := range map[string]string{"user_name": "elicitation/create", "greeting": "sampling/createMessage", "client_roots": "roots/list"} {
		if r1.inputMethod(k) != m {
			t.Fatalf("%s: method %q, want %s", k, r1.inputMethod(k), m)
		}
	}
	// Two of three answers: the sealed continuation keeps them and only
	// the third is asked again.
	r2 := callRaw(t, ts.url, tool, map[string]any{"inputResponses": map[string]any{
		"user_name": elicitAnswer(map[string]any{"name": "Alice"}),
		"greeting":  samplingAnswer,
	}, "requestState": r1.state()}, nil)
	wantInputRequired(t, r2, "client_roots")
	r3 := callRaw(t, ts.url, tool, map[string]any{"inputResponses": map[string]any{"client_roots": rootsAnswer}, "requestState": r2.state()}, nil)
	wantComplete(t, r3, `^Hello, Alice! Greeting: "Paris". Roots: file:///test/root.$`)

	// All three at once, as the harness answers.
	all := callRaw(t, ts.url, tool, map[string]any{"inputResponses": map[string]any{
		"user_name":    elicitAnswer(map[string]any{"name": "Bob"}),
		"greeting":     samplingAnswer,
		"client_roots": rootsAnswer,
	}, "requestState": r1.state()}, nil)
	wantComplete(t, all, "^Hello, Bob!")
}

func TestMultiRoundFixture(t *testing.T) {
	ts := start(t, nil, nil)
	const tool = "test_input_required_result_multi_round"
	r1 := callRaw(t, ts.url, tool, nil, nil)
	wantInputRequired(t, r1, "step1")
	r2 := callRaw(t, ts.url, tool, map[string]any{"inputResponses": map[string]any{"step1": elicitAnswer(map[string]any{"name": "Alice"})}, "requestState": r1.state()}, nil)
	wantInputRequired(t, r2, "step2")
	if r2.state() == r1.state() {
		t.Fatal("round 2 reused round 1's requestState")
	}
	r3 := callRaw(t, ts.url, tool, map[string]any{"inputResponses": map[string]any{"step2": elicitAnswer(map[string]any{"color": "blue"})}, "requestState": r2.state()}, nil)
	wantComplete(t, r3, "^Multi-round complete: Alice likes blue$")

	// Round 1's state answers step1 only: a step2 answer under it is
	// dropped and step1 asked again.
	again := callRaw(t, ts.url, tool, map[string]any{"inputResponses": map[string]any{"step2": elicitAnswer(map[string]any{"color": "red"})}, "requestState": r1.state()}, nil)
	wantInputRequired(t, again, "step1")
}

func TestCapabilitiesFixture(t *testing.T) {
	ts := start(t, nil, nil)
	const tool = "test_input_required_result_capabilities"
	// A13: only sampling declared.
	r := callRaw(t, ts.url, tool, nil, map[string]any{"sampling": map[string]any{}})
	wantInputRequired(t, r, "sample_input")
	if r.inputMethod("sample_input") != "sampling/createMessage" {
		t.Fatalf("method %q", r.inputMethod("sample_input"))
	}
	done := callRaw(t, ts.url, tool, map[string]any{"inputResponses": map[string]any{"sample_input": samplingAnswer}, "requestState": r.state()},
		map[string]any{"sampling": map[string]any{}})
	wantComplete(t, done, "^capabilities-ok: answered sample_input$")

	wantInputRequired(t, callRaw(t, ts.url, tool, nil, nil), "elicit_input", "roots_input", "sample_input")
	wantInputRequired(t, callRaw(t, ts.url, tool, nil, map[string]any{"elicitation": map[string]any{}}), "elicit_input")
	wantComplete(t, callRaw(t, ts.url, tool, nil, map[string]any{}), "no capability")
}

func TestPromptFixture(t *testing.T) {
	ts := start(t, nil, nil)
	const prompt = "test_input_required_result_prompt"
	r1 := raw(t, ts.url, "prompts/get", map[string]any{"name": prompt}, nil)
	wantInputRequired(t, r1, "user_context")
	r2 := raw(t, ts.url, "prompts/get", map[string]any{"name": prompt,
		"inputResponses": map[string]any{"user_context": elicitAnswer(map[string]any{"context": "test context"})}, "requestState": r1.state()}, nil)
	if r2.Error != nil || r2.resultType() != "complete" {
		t.Fatalf("round 2: %+v", r2)
	}
	msgs, _ := json.Marshal(r2.Result["messages"])
	if string(msgs) != `[{"content":{"text":"Context: test context","type":"text"},"role":"user"}]` {
		t.Fatalf("messages %s", msgs)
	}
	// The prompt's state does not open on the tool of the same flow shape.
	wantRawRejected(t, callRaw(t, ts.url, elicitTool, map[string]any{"inputResponses": map[string]any{
		"user_name": elicitAnswer(map[string]any{"name": "x"})}, "requestState": r1.state()}, nil), mrtr.ReasonInvalid)
}

// A11: lists never pause.
func TestListsNeverInputRequired(t *testing.T) {
	ts := start(t, nil, nil)
	for _, m := range []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list"} {
		r := raw(t, ts.url, m, map[string]any{}, nil)
		if r.Error != nil || r.resultType() != "complete" {
			t.Errorf("%s: %+v", m, r)
		}
	}
}

func TestMissingCapabilityFixture(t *testing.T) {
	ts := start(t, nil, nil)
	r := callRaw(t, ts.url, "test_missing_capability", nil, map[string]any{})
	if r.Error == nil || r.Error.Code != -32021 || r.status != http.StatusBadRequest {
		t.Fatalf("HTTP %d %+v, want 400 and -32021", r.status, r)
	}
	var data struct {
		RequiredCapabilities map[string]map[string]any `json:"requiredCapabilities"`
	}
	if err := json.Unmarshal(r.Error.Data, &data); err != nil || data.RequiredCapabilities["sampling"] == nil {
		t.Fatalf("data %s, want requiredCapabilities.sampling an object", r.Error.Data)
	}
	// With sampling it works, through a sealed pause.
	r1 := callRaw(t, ts.url, "test_missing_capability", nil, nil)
	wantInputRequired(t, r1, "model_answer")
	r2 := callRaw(t, ts.url, "test_missing_capability", map[string]any{"inputResponses": map[string]any{"model_answer": samplingAnswer}, "requestState": r1.state()}, nil)
	wantComplete(t, r2, "Paris")
}

func TestStreamingElicitationFixture(t *testing.T) {
	ts := start(t, nil, nil)
	caps := map[string]any{"elicitation": map[string]any{}}
	r1 := callRaw(t, ts.url, "test_streaming_elicitation", nil, caps)
	wantInputRequired(t, r1, "confirm")
	r2 := callRaw(t, ts.url, "test_streaming_elicitation", map[string]any{"inputResponses": map[string]any{"confirm": elicitAnswer(map[string]any{"ok": true})}, "requestState": r1.state()}, caps)
	wantComplete(t, r2, `action=accept, content=\{"ok":true\}`)
}
