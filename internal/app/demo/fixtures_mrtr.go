package demo

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/gosdk"
)

// Input request keys of the SEP-2322 fixtures. The conformance harness
// relies on user_name by name; it answers the others by method or by
// taking the first key, and they follow the suite's descriptions.
const (
	keyUserName    = "user_name"
	keyCapital     = "capital_question"
	keyClientRoots = "client_roots"
	keyConfirm     = "confirm"
	keyGreeting    = "greeting"
	keyStep1       = "step1"
	keyStep2       = "step2"
	keyUserContext = "user_context"
	keySample      = "sample_input"
	keyElicit      = "elicit_input"
	keyRoots       = "roots_input"
)

func askName(message string) *mcp.ElicitParams {
	return form(message, map[string]any{"name": prop("string")})
}

func askOK(message string) *mcp.ElicitParams {
	return form(message, map[string]any{"ok": prop("boolean")})
}

// acceptedString returns the non-blank string field of an accepted
// elicitation answer.
func acceptedString(r *mcp.ElicitResult, field string) (string, bool) {
	if r == nil || r.Action != "accept" {
		return "", false
	}
	s, ok := r.Content[field].(string)
	if !ok || strings.TrimSpace(s) == "" {
		return "", false
	}
	return s, true
}

// refused reports an answer that declined or cancelled: the flow ends.
func refused(r *mcp.ElicitResult) bool {
	return r != nil && (r.Action == "decline" || r.Action == "cancel")
}

func rootURIs(r *mcp.ListRootsResult) []string {
	uris := make([]string, 0, len(r.Roots))
	for _, root := range r.Roots {
		if root != nil {
			uris = append(uris, root.URI)
		}
	}
	return uris
}

// addMRTRFixtures registers the tools and the prompt of the SEP-2322
// (input_required) scenarios. Every pause goes through the adapter, so its
// requestState is sealed, bound to the call and checked by the guard
// before the handler runs; a tampered or foreign state never reaches
// these handlers (-32602, data.reason "invalid").
func addMRTRFixtures(a *gosdk.Adapter) {
	// A1, A7, A10, A14, A15: the ephemeral pattern. The answer may arrive
	// verified (echoing the sealed state of the pause that asked) or, as
	// the suite also does, on a first call without any requestState: the
	// name is harmless, so an unverified answer is accepted too. Anything
	// that is not an accepted object with a non-blank name is asked
	// again.
	gosdk.AddTool(a, &mcp.Tool{Name: "test_input_required_result_elicitation", Description: "Asks the user's name (input_required, key user_name), then greets them.",
		InputSchema: emptyObject()},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}, flow *gosdk.ToolFlow[struct{}]) (*mcp.CallToolResult, error) {
			ans, ok := flow.Elicited(keyUserName)
			if !ok && !flow.Resumed() {
				if r, found := flow.Unverified(keyUserName); found {
					ans, ok = r.(*mcp.ElicitResult)
				}
			}
			if ok {
				if name, valid := acceptedString(ans, "name"); valid {
					return text("Hello, " + name + "!"), nil
				}
				if refused(ans) {
					return toolError("no name given: the user chose to " + ans.Action), nil
				}
				return flow.Ask(struct{}{}, mcp.InputRequestMap{keyUserName: askName("What is your name? (a non-empty name, please)")})
			}
			return flow.Ask(struct{}{}, mcp.InputRequestMap{keyUserName: askName("What is your name?")})
		})

	// A2: one sampling request; the answer must be verified.
	gosdk.AddTool(a, &mcp.Tool{Name: "test_input_required_result_sampling", Description: "Asks the client's model a question (input_required, sampling), then reports the answer.",
		InputSchema: emptyObject()},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}, flow *gosdk.ToolFlow[struct{}]) (*mcp.CallToolResult, error) {
			if r, ok := flow.Sampled(keyCapital); ok {
				return text("The model answered: " + sampledText(r)), nil
			}
			return flow.Ask(struct{}{}, mcp.InputRequestMap{keyCapital: sample("What is the capital of France?", 100)})
		})

	// A3: one roots/list request.
	gosdk.AddTool(a, &mcp.Tool{Name: "test_input_required_result_list_roots", Description: "Asks the client for its roots (input_required, roots/list), then lists them.",
		InputSchema: emptyObject()},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}, flow *gosdk.ToolFlow[struct{}]) (*mcp.CallToolResult, error) {
			if r, ok := flow.Roots(keyClientRoots); ok {
				uris := rootURIs(r)
				if len(uris) == 0 {
					return text("The client has no roots."), nil
				}
				return text("Client roots: " + strings.Join(uris, ", ")), nil
			}
			return flow.Ask(struct{}{}, mcp.InputRequestMap{keyClientRoots: &mcp.ListRootsParams{}})
		})

	// A4 and A12: a sealed continuation that the answer must come back
	// with. The guard authenticates the whole requestState (AES-256-GCM
	// under this call's binding) before the handler runs, so an altered
	// state is a JSON-RPC error and never a re-prompt.
	type purpose struct {
		Fixture string `json:"fixture"`
	}
	confirmFixture := func(name, desc, okText string) {
		gosdk.AddTool(a, &mcp.Tool{Name: name, Description: desc, InputSchema: emptyObject()},
			func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}, flow *gosdk.ToolFlow[purpose]) (*mcp.CallToolResult, error) {
				st, resumed := flow.State()
				ans, ok := flow.Elicited(keyConfirm)
				switch {
				case !resumed:
					return flow.Ask(purpose{Fixture: name}, mcp.InputRequestMap{keyConfirm: askOK("Please confirm")})
				case !ok:
					return flow.Ask(st, mcp.InputRequestMap{keyConfirm: askOK("Please confirm (no answer received)")})
				case ans.Action != "accept":
					return toolError(fmt.Sprintf("%s: requestState verified, but the user chose to %s", okText, ans.Action)), nil
				}
				return text(fmt.Sprintf("%s: requestState verified (flow %s, round %d), confirmed=%v", okText, flow.ID(), flow.Round(), ans.Content["ok"] == true)), nil
			})
	}
	confirmFixture("test_input_required_result_request_state", "Asks for confirmation with a sealed requestState and checks it on the retry.", "state-ok")
	confirmFixture("test_input_required_result_tampered_state", "Asks for confirmation with a sealed requestState; an altered state is rejected with -32602.", "state-ok")

	// A5: three input requests in one round. What has been answered so
	// far is kept in the sealed continuation, and only the rest is asked
	// again.
	type gathered struct {
		Name     *string  `json:"name,omitempty"`
		Greeting *string  `json:"greeting,omitempty"`
		Roots    []string `json:"roots,omitempty"`
		HasRoots bool     `json:"hasRoots,omitempty"`
	}
	gosdk.AddTool(a, &mcp.Tool{Name: "test_input_required_result_multiple_inputs", Description: "Asks for a name, a sampled greeting and the client's roots in one round.",
		InputSchema: emptyObject()},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}, flow *gosdk.ToolFlow[gathered]) (*mcp.CallToolResult, error) {
			st, _ := flow.State()
			if r, ok := flow.Elicited(keyUserName); ok {
				if refused(r) {
					return toolError("no name given: the user chose to " + r.Action), nil
				}
				if name, valid := acceptedString(r, "name"); valid {
					st.Name = &name
				}
			}
			if r, ok := flow.Sampled(keyGreeting); ok {
				g := sampledText(r)
				st.Greeting = &g
			}
			if r, ok := flow.Roots(keyClientRoots); ok {
				st.Roots, st.HasRoots = rootURIs(r), true
			}
			missing := mcp.InputRequestMap{}
			if st.Name == nil {
				missing[keyUserName] = askName("What is your name?")
			}
			if st.Greeting == nil {
				missing[keyGreeting] = sample("Generate a greeting", 50)
			}
			if !st.HasRoots {
				missing[keyClientRoots] = &mcp.ListRootsParams{}
			}
			if len(missing) > 0 {
				return flow.Ask(st, missing)
			}
			return text(fmt.Sprintf("Hello, %s! Greeting: %q. Roots: %s.", *st.Name, *st.Greeting, strings.Join(st.Roots, ", "))), nil
		})

	// A6: three rounds; each pause seals a new state (round number, fresh
	// nonce), so round 2's requestState differs from round 1's.
	type progress struct {
		Step int    `json:"step"`
		Name string `json:"name,omitempty"`
	}
	step1 := func() mcp.InputRequestMap {
		return mcp.InputRequestMap{keyStep1: askName("Step 1: What is your name?")}
	}
	step2 := func() mcp.InputRequestMap {
		return mcp.InputRequestMap{keyStep2: form("Step 2: What is your favorite color?", map[string]any{"color": prop("string")})}
	}
	gosdk.AddTool(a, &mcp.Tool{Name: "test_input_required_result_multi_round", Description: "Asks a name, then a favorite color, in two sealed rounds.",
		InputSchema: emptyObject()},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}, flow *gosdk.ToolFlow[progress]) (*mcp.CallToolResult, error) {
			st, resumed := flow.State()
			if !resumed {
				return flow.Ask(progress{Step: 1}, step1())
			}
			switch st.Step {
			case 1:
				r, _ := flow.Elicited(keyStep1)
				if refused(r) {
					return toolError("stopped at step 1: the user chose to " + r.Action), nil
				}
				name, ok := acceptedString(r, "name")
				if !ok {
					return flow.Ask(st, step1())
				}
				return flow.Ask(progress{Step: 2, Name: name}, step2())
			case 2:
				r, _ := flow.Elicited(keyStep2)
				if refused(r) {
					return toolError("stopped at step 2: the user chose to " + r.Action), nil
				}
				color, ok := acceptedString(r, "color")
				if !ok {
					return flow.Ask(st, step2())
				}
				return text(fmt.Sprintf("Multi-round complete: %s likes %s", st.Name, color)), nil
			}
			return nil, fmt.Errorf("multi_round: unknown step %d", st.Step) // unreachable: we sealed the step
		})

	// A13: asks only what this request's client can answer, judged on the
	// capabilities declared in this very request's _meta.
	type asked struct {
		Keys []string `json:"keys"`
	}
	gosdk.AddTool(a, &mcp.Tool{Name: "test_input_required_result_capabilities", Description: "Asks for input only through the capabilities the client declared on this request.",
		InputSchema: emptyObject()},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}, flow *gosdk.ToolFlow[asked]) (*mcp.CallToolResult, error) {
			all := mcp.InputRequestMap{
				keySample: sample("Say hello in one word.", 20),
				keyElicit: askName("What is your name?"),
				keyRoots:  &mcp.ListRootsParams{},
			}
			if st, resumed := flow.State(); resumed {
				var answered []string
				missing := mcp.InputRequestMap{}
				for _, k := range st.Keys {
					if answeredKey(&flow.Flow, k) {
						answered = append(answered, k)
					} else if r, ok := all[k]; ok && flow.Supports(r) {
						missing[k] = r
					}
				}
				if len(missing) > 0 {
					return flow.Ask(st, missing)
				}
				return text("capabilities-ok: answered " + strings.Join(answered, ", ")), nil
			}
			reqs := mcp.InputRequestMap{}
			for k, r := range all {
				if flow.Supports(r) {
					reqs[k] = r
				}
			}
			if len(reqs) == 0 {
				return text("The client declared no capability to answer input requests with."), nil
			}
			return flow.Ask(asked{Keys: slices.Sorted(maps.Keys(reqs))}, reqs)
		})

	// A9: input_required on prompts/get.
	gosdk.AddPrompt(a, &mcp.Prompt{Name: "test_input_required_result_prompt", Description: "Asks the user for context (input_required, key user_context), then builds the prompt from it."},
		func(ctx context.Context, req *mcp.GetPromptRequest, flow *gosdk.PromptFlow[struct{}]) (*mcp.GetPromptResult, error) {
			ask := mcp.InputRequestMap{keyUserContext: form("What context should the prompt use?", map[string]any{"context": prop("string")})}
			r, ok := flow.Elicited(keyUserContext)
			if !ok {
				return flow.Ask(struct{}{}, ask)
			}
			if refused(r) {
				return &mcp.GetPromptResult{Description: "no context given", Messages: []*mcp.PromptMessage{
					{Role: "user", Content: &mcp.TextContent{Text: "No context was provided."}},
				}}, nil
			}
			c, valid := acceptedString(r, "context")
			if !valid {
				return flow.Ask(struct{}{}, ask)
			}
			return &mcp.GetPromptResult{Description: "a prompt built from the user's context", Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "Context: " + c}},
			}}, nil
		})
}

// answeredKey reports whether the sealed round's question k got a
// verified answer of the right kind.
func answeredKey[C any](f *gosdk.Flow[C], k string) bool {
	switch k {
	case keySample:
		_, ok := f.Sampled(k)
		return ok
	case keyElicit:
		r, ok := f.Elicited(k)
		return ok && r.Action == "accept"
	case keyRoots:
		_, ok := f.Roots(k)
		return ok
	}
	return false
}
