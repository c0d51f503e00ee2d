package demo

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/gosdk"
)

// addSessionFixtures registers the fixtures the 2025-11-25 suite calls to
// see the server ask the client something (sampling, elicitation, the
// SEP-1034 defaults and SEP-1330 enums). They pause through the adapter
// like any multi-round tool: on the 2025-11-25 wire go-sdk's bridge turns
// the pause into a real sampling/createMessage or elicitation/create
// request on the session, on 2026-07-28 it is an input_required result
// with a sealed requestState. A client without the capability gets -32021.
func addSessionFixtures(a *gosdk.Adapter) {
	type promptArgs struct {
		Prompt string `json:"prompt"`
	}
	gosdk.AddTool(a, &mcp.Tool{Name: "test_sampling", Description: "Asks the client's model to complete a prompt (sampling/createMessage).",
		InputSchema: objectSchema(map[string]any{"prompt": describedProp("string", "The prompt to send to the LLM")}, "prompt")},
		func(ctx context.Context, req *mcp.CallToolRequest, args promptArgs, flow *gosdk.ToolFlow[struct{}]) (*mcp.CallToolResult, error) {
			if r, ok := flow.Sampled("completion"); ok {
				return text("LLM response: " + sampledText(r)), nil
			}
			return flow.Ask(struct{}{}, mcp.InputRequestMap{"completion": sample(args.Prompt, 100)})
		})

	type messageArgs struct {
		Message string `json:"message"`
	}
	gosdk.AddTool(a, &mcp.Tool{Name: "test_elicitation", Description: "Asks the user for a username and an email address (elicitation/create).",
		InputSchema: objectSchema(map[string]any{"message": describedProp("string", "The message to show the user")}, "message")},
		func(ctx context.Context, req *mcp.CallToolRequest, args messageArgs, flow *gosdk.ToolFlow[struct{}]) (*mcp.CallToolResult, error) {
			if r, ok := flow.Elicited("user_response"); ok {
				return text("User response: " + describeElicitation(r)), nil
			}
			return flow.Ask(struct{}{}, mcp.InputRequestMap{"user_response": &mcp.ElicitParams{
				Message: args.Message,
				RequestedSchema: objectSchema(map[string]any{
					"username": describedProp("string", "User's response"),
					"email":    describedProp("string", "User's email address"),
				}, "username", "email"),
			}})
		})

	gosdk.AddTool(a, &mcp.Tool{Name: "test_elicitation_sep1034_defaults", Description: "Elicits a form whose fields all carry defaults (SEP-1034).",
		InputSchema: emptyObject()},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}, flow *gosdk.ToolFlow[struct{}]) (*mcp.CallToolResult, error) {
			if r, ok := flow.Elicited("profile"); ok {
				return text("Elicitation completed: " + describeElicitation(r)), nil
			}
			return flow.Ask(struct{}{}, mcp.InputRequestMap{"profile": &mcp.ElicitParams{
				Message: "Please review your profile; every field has a default.",
				RequestedSchema: objectSchema(map[string]any{
					"name":     withDefault(describedProp("string", "User name"), "John Doe"),
					"age":      withDefault(describedProp("integer", "User age"), 30),
					"score":    withDefault(describedProp("number", "User score"), 95.5),
					"status":   withDefault(enumProp("User status", "active", "inactive", "pending"), "active"),
					"verified": withDefault(describedProp("boolean", "Verification status"), true),
				}),
			}})
		})

	gosdk.AddTool(a, &mcp.Tool{Name: "test_elicitation_sep1330_enums", Description: "Elicits a form with the five enum shapes of SEP-1330.",
		InputSchema: emptyObject()},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}, flow *gosdk.ToolFlow[struct{}]) (*mcp.CallToolResult, error) {
			if r, ok := flow.Elicited("choices"); ok {
				return text("Elicitation completed: " + describeElicitation(r)), nil
			}
			return flow.Ask(struct{}{}, mcp.InputRequestMap{"choices": &mcp.ElicitParams{
				Message:         "Pick one or more options in each field.",
				RequestedSchema: objectSchema(sep1330Properties()),
			}})
		})
}

// sep1330Properties are the five enum shapes of SEP-1330, one per field.
func sep1330Properties() map[string]any {
	titled := func(prefix string, titles ...string) []any {
		out := make([]any, len(titles))
		for i, t := range titles {
			out[i] = map[string]any{"const": fmt.Sprintf("%s%d", prefix, i+1), "title": t}
		}
		return out
	}
	return map[string]any{
		"untitledSingle": map[string]any{"type": "string", "description": "Untitled single-select",
			"enum": []string{"option1", "option2", "option3"}},
		"titledSingle": map[string]any{"type": "string", "description": "Titled single-select",
			"oneOf": titled("value", "First Option", "Second Option", "Third Option")},
		"legacyEnum": map[string]any{"type": "string", "description": "Legacy titled enum (enumNames, deprecated)",
			"enum": []string{"opt1", "opt2", "opt3"}, "enumNames": []string{"Option One", "Option Two", "Option Three"}},
		"untitledMulti": map[string]any{"type": "array", "description": "Untitled multi-select",
			"items": map[string]any{"type": "string", "enum": []string{"option1", "option2", "option3"}}},
		"titledMulti": map[string]any{"type": "array", "description": "Titled multi-select",
			"items": map[string]any{"anyOf": titled("value", "First Choice", "Second Choice", "Third Choice")}},
	}
}

// describeElicitation renders an elicitation answer for a result text.
func describeElicitation(r *mcp.ElicitResult) string {
	content, err := json.Marshal(r.Content)
	if err != nil || r.Content == nil {
		content = []byte("{}")
	}
	return fmt.Sprintf("action=%s, content=%s", r.Action, content)
}

// objectSchema is an object schema of props, with the named ones required.
func objectSchema(props map[string]any, required ...string) map[string]any {
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func describedProp(typ, desc string) map[string]any {
	return map[string]any{"type": typ, "description": desc}
}

func enumProp(desc string, values ...string) map[string]any {
	return map[string]any{"type": "string", "description": desc, "enum": values}
}

func withDefault(p map[string]any, v any) map[string]any {
	p["default"] = v
	return p
}
