package example

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mrtr-go/mrtr/mcpgo"
)

// addFixtures registers the tools and the prompt of the conformance
// suite's input-required-result-* (SEP-2322) scenarios. Every pause is
// sealed by the guard; a tampered or foreign requestState never reaches
// these handlers.
func addFixtures(a *mcpgo.Adapter) {
	tool := func(name, desc string) mcp.Tool { return mcp.NewTool(name, mcp.WithDescription(desc)) }
	askName := func(msg string) mcp.InputRequests {
		return mcp.InputRequests{"user_name": form(msg, map[string]any{"name": prop("string")})}
	}

	// The ephemeral pattern: the answer may come verified or, on a first
	// call without requestState, unverified; a name is harmless either way.
	mcpgo.AddTool(a, tool("test_input_required_result_elicitation", "Asks the user's name (key user_name), then greets them."),
		func(ctx context.Context, req mcp.CallToolRequest, _ struct{}, flow *mcpgo.ToolFlow[struct{}]) (*mcp.CallToolResult, error) {
			ans, ok := flow.Elicited("user_name")
			if !ok && !flow.Resumed() {
				if r, found := flow.Unverified("user_name"); found && r.DecodeFor(mcp.MethodElicitationCreate) == nil && r.Elicitation != nil {
					ans, ok = r.Elicitation, true
				}
			}
			if !ok {
				return flow.Ask(struct{}{}, askName("What is your name?"))
			}
			if name, valid := acceptedString(ans, "name"); valid {
				return mcp.NewToolResultText("Hello, " + name + "!"), nil
			}
			if refused(ans) {
				return mcp.NewToolResultError("no name given: the user chose to " + string(ans.Action)), nil
			}
			return flow.Ask(struct{}{}, askName("What is your name? (a non-empty name, please)"))
		})

	mcpgo.AddTool(a, tool("test_input_required_result_sampling", "Asks the client's model a question (sampling)."),
		func(ctx context.Context, req mcp.CallToolRequest, _ struct{}, flow *mcpgo.ToolFlow[struct{}]) (*mcp.CallToolResult, error) {
			if r, ok := flow.Sampled("capital_question"); ok {
				return mcp.NewToolResultText("The model answered: " + SampledText(r)), nil
			}
			return flow.Ask(struct{}{}, mcp.InputRequests{"capital_question": sample("What is the capital of France?", 100)})
		})

	mcpgo.AddTool(a, tool("test_input_required_result_list_roots", "Asks the client for its roots (roots/list)."),
		func(ctx context.Context, req mcp.CallToolRequest, _ struct{}, flow *mcpgo.ToolFlow[struct{}]) (*mcp.CallToolResult, error) {
			if r, ok := flow.Roots("client_roots"); ok {
				return mcp.NewToolResultText("Client roots: " + strings.Join(rootURIs(r), ", ")), nil
			}
			return flow.Ask(struct{}{}, mcp.InputRequests{"client_roots": mcp.NewRootsInputRequest()})
		})

	// A sealed continuation the answer must come back with: an altered
	// state is a JSON-RPC error (-32602, reason invalid), never a re-prompt.
	type purpose struct {
		Fixture string `json:"fixture"`
	}
	for _, name := range []string{"test_input_required_result_request_state", "test_input_required_result_tampered_state"} {
		confirm := mcp.InputRequests{"confirm": form("Please confirm", map[string]any{"ok": prop("boolean")})}
		mcpgo.AddTool(a, tool(name, "Asks for confirmation with a sealed requestState and checks it on the retry."),
			func(ctx context.Context, req mcp.CallToolRequest, _ struct{}, flow *mcpgo.ToolFlow[purpose]) (*mcp.CallToolResult, error) {
				st, resumed := flow.State()
				ans, ok := flow.Elicited("confirm")
				switch {
				case !resumed:
					return flow.Ask(purpose{Fixture: name}, confirm)
				case !ok:
					return flow.Ask(st, confirm)
				case ans.Action != mcp.ElicitationResponseActionAccept:
					return mcp.NewToolResultError("state-ok: requestState verified, but the user chose to " + string(ans.Action)), nil
				}
				return mcp.NewToolResultText(fmt.Sprintf("state-ok: requestState verified (flow %s, round %d)", flow.ID(), flow.Round())), nil
			})
	}

	// Three input requests in one round; what is answered is kept sealed
	// and only the rest asked again.
	type gathered struct {
		Name     string   `json:"name,omitempty"`
		Greeting *string  `json:"greeting,omitempty"`
		Roots    []string `json:"roots,omitempty"`
		HasRoots bool     `json:"hasRoots,omitempty"`
	}
	mcpgo.AddTool(a, tool("test_input_required_result_multiple_inputs", "Asks a name, a sampled greeting and the roots in one round."),
		func(ctx context.Context, req mcp.CallToolRequest, _ struct{}, flow *mcpgo.ToolFlow[gathered]) (*mcp.CallToolResult, error) {
			st, _ := flow.State()
			if r, ok := flow.Elicited("user_name"); ok {
				st.Name, _ = acceptedString(r, "name")
			}
			if r, ok := flow.Sampled("greeting"); ok {
				g := SampledText(r)
				st.Greeting = &g
			}
			if r, ok := flow.Roots("client_roots"); ok {
				st.Roots, st.HasRoots = rootURIs(r), true
			}
			missing := mcp.InputRequests{}
			if st.Name == "" {
				maps.Copy(missing, askName("What is your name?"))
			}
			if st.Greeting == nil {
				missing["greeting"] = sample("Generate a greeting", 50)
			}
			if !st.HasRoots {
				missing["client_roots"] = mcp.NewRootsInputRequest()
			}
			if len(missing) > 0 {
				return flow.Ask(st, missing)
			}
			return mcp.NewToolResultText(fmt.Sprintf("Hello, %s! Greeting: %q. Roots: %s.", st.Name, *st.Greeting, strings.Join(st.Roots, ", "))), nil
		})

	// Two sealed rounds: each pause seals a new state.
	type progress struct {
		Step int    `json:"step"`
		Name string `json:"name,omitempty"`
	}
	step := map[int]mcp.InputRequests{
		1: {"step1": form("Step 1: What is your name?", map[string]any{"name": prop("string")})},
		2: {"step2": form("Step 2: What is your favorite color?", map[string]any{"color": prop("string")})},
	}
	mcpgo.AddTool(a, tool("test_input_required_result_multi_round", "Asks a name, then a favorite color, in two sealed rounds."),
		func(ctx context.Context, req mcp.CallToolRequest, _ struct{}, flow *mcpgo.ToolFlow[progress]) (*mcp.CallToolResult, error) {
			st, resumed := flow.State()
			if !resumed {
				return flow.Ask(progress{Step: 1}, step[1])
			}
			key, field := "step1", "name"
			if st.Step == 2 {
				key, field = "step2", "color"
			}
			r, _ := flow.Elicited(key)
			if refused(r) {
				return mcp.NewToolResultError(fmt.Sprintf("stopped at step %d: the user chose to %s", st.Step, r.Action)), nil
			}
			v, ok := acceptedString(r, field)
			switch {
			case !ok:
				return flow.Ask(st, step[st.Step])
			case st.Step == 1:
				return flow.Ask(progress{Step: 2, Name: v}, step[2])
			}
			return mcp.NewToolResultText(fmt.Sprintf("Multi-round complete: %s likes %s", st.Name, v)), nil
		})

	// Asks only what this request's client declared it can answer.
	type asked struct {
		Keys []string `json:"keys"`
	}
	mcpgo.AddTool(a, tool("test_input_required_result_capabilities", "Asks for input only through the capabilities the client declared."),
		func(ctx context.Context, req mcp.CallToolRequest, _ struct{}, flow *mcpgo.ToolFlow[asked]) (*mcp.CallToolResult, error) {
			all := mcp.InputRequests{
				"sample_input": sample("Say hello in one word.", 20),
				"elicit_input": form("What is your name?", map[string]any{"name": prop("string")}),
				"roots_input":  mcp.NewRootsInputRequest(),
			}
			st, resumed := flow.State()
			if !resumed {
				st.Keys = slices.Sorted(maps.Keys(all))
			}
			answered := map[string]bool{}
			if _, ok := flow.Sampled("sample_input"); ok {
				answered["sample_input"] = true
			}
			if r, ok := flow.Elicited("elicit_input"); ok && r.Action == mcp.ElicitationResponseActionAccept {
				answered["elicit_input"] = true
			}
			if _, ok := flow.Roots("roots_input"); ok {
				answered["roots_input"] = true
			}
			reqs := mcp.InputRequests{}
			var done []string
			for _, k := range st.Keys {
				switch {
				case answered[k]:
					done = append(done, k)
				case flow.Supports(all[k]):
					reqs[k] = all[k]
				}
			}
			if len(reqs) > 0 {
				return flow.Ask(asked{Keys: slices.Sorted(maps.Keys(reqs))}, reqs)
			}
			if len(done) == 0 {
				return mcp.NewToolResultText("The client declared no capability to answer input requests with."), nil
			}
			return mcp.NewToolResultText("capabilities-ok: answered " + strings.Join(done, ", ")), nil
		})

	// input_required on prompts/get.
	mcpgo.AddPrompt(a, mcp.NewPrompt("test_input_required_result_prompt", mcp.WithPromptDescription("Asks the user for context (key user_context).")),
		func(ctx context.Context, req mcp.GetPromptRequest, flow *mcpgo.PromptFlow[struct{}]) (*mcp.GetPromptResult, error) {
			ask := mcp.InputRequests{"user_context": form("What context should the prompt use?", map[string]any{"context": prop("string")})}
			r, ok := flow.Elicited("user_context")
			if ok && refused(r) {
				return mcp.NewGetPromptResult("no context given", []mcp.PromptMessage{
					mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("No context was provided."))}), nil
			}
			c, valid := acceptedString(r, "context")
			if !ok || !valid {
				return flow.Ask(struct{}{}, ask)
			}
			return mcp.NewGetPromptResult("a prompt built from the user's context", []mcp.PromptMessage{
				mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("Context: "+c))}), nil
		})
}

func rootURIs(r *mcp.ListRootsResult) []string {
	uris := make([]string, 0, len(r.Roots))
	for _, root := range r.Roots {
		uris = append(uris, root.URI)
	}
	return uris
}
