package demo_test

import (
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/internal/app/demo"
)

func TestContentFixtures(t *testing.T) {
	ts := start(t, nil, nil)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			cs := connect(t, ts, clientOpts{wire: wire})
			kinds := func(res *mcp.CallToolResult) []string {
				var out []string
				for _, c := range res.Content {
					switch c := c.(type) {
					case *mcp.TextContent:
						out = append(out, "text")
					case *mcp.ImageContent:
						if len(c.Data) > 0 && c.MIMEType == "image/png" {
							out = append(out, "image")
						}
					case *mcp.AudioContent:
						if len(c.Data) > 0 && c.MIMEType == "audio/wav" {
							out = append(out, "audio")
						}
					case *mcp.EmbeddedResource:
						if c.Resource != nil && c.Resource.URI != "" && c.Resource.MIMEType != "" && c.Resource.Text != "" {
							out = append(out, "resource")
						}
					}
				}
				return out
			}
			for tool, want := range map[string][]string{
				"test_simple_text":            {"text"},
				"test_image_content":          {"image"},
				"test_audio_content":          {"audio"},
				"test_embedded_resource":      {"resource"},
				"test_multiple_content_types": {"text", "image", "resource"},
				"json_schema_2020_12_tool":    {"text"},
			} {
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool}) // no arguments member
				if err != nil {
					t.Fatalf("%s: %v", tool, err)
				}
				if got := kinds(res); res.IsError || !slices.Equal(got, want) {
					t.Errorf("%s: isError %v content %v, want %v", tool, res.IsError, got, want)
				}
			}
			if res := callTool(t, cs, "test_error_handling", nil); !res.IsError || resultText(res) == "" {
				t.Errorf("test_error_handling: isError %v text %q", res.IsError, resultText(res))
			}
		})
	}
}

func TestProgressAndLogging(t *testing.T) {
	ts := start(t, nil, nil)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			var mu sync.Mutex
			var progress []float64
			var logs []string
			cs := connect(t, ts, clientOpts{wire: wire,
				progress: func(p *mcp.ProgressNotificationParams) {
					mu.Lock()
					defer mu.Unlock()
					if p.ProgressToken == "progress-test-1" {
						progress = append(progress, p.Progress)
					}
				},
				log: func(p *mcp.LoggingMessageParams) {
					mu.Lock()
					defer mu.Unlock()
					logs = append(logs, p.Data.(string))
				}})
			params := &mcp.CallToolParams{Name: "test_tool_with_progress", Arguments: map[string]any{}}
			params.SetProgressToken("progress-test-1")
			if _, err := cs.CallTool(t.Context(), params); err != nil {
				t.Fatal(err)
			}
			// The client may still be dispatching the last notification
			// when the result arrives.
			waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(progress) >= 3 })
			mu.Lock()
			if !slices.Equal(progress, []float64{0, 50, 100}) {
				t.Errorf("progress %v, want 0 50 100", progress)
			}
			mu.Unlock()

			if wire != legacy {
				return // logging/setLevel is gone on 2026-07-28
			}
			if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
				t.Fatal(err)
			}
			callTool(t, cs, "test_tool_with_logging", map[string]any{})
			waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(logs) >= 3 })
			mu.Lock()
			defer mu.Unlock()
			if len(logs) != 3 {
				t.Errorf("logs %q, want 3", logs)
			}
		})
	}
}

// The fixtures the 2025-11-25 suite calls to see the server ask the
// client: real server-to-client requests there, input_required on
// 2026-07-28, the same handler either way.
func TestSessionFixtures(t *testing.T) {
	ts := start(t, nil, nil)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			var mu sync.Mutex
			var schemas []map[string]any
			var prompts []string
			cs := connect(t, ts, clientOpts{wire: wire,
				elicit: func(r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					defer mu.Unlock()
					s, _ := r.Params.RequestedSchema.(map[string]any)
					if s == nil { // the client may keep it as raw JSON
						b, _ := json.Marshal(r.Params.RequestedSchema)
						_ = json.Unmarshal(b, &s)
					}
					schemas = append(schemas, s)
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "testuser", "email": "test@example.com"}}, nil
				},
				sample: func(r *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
					mu.Lock()
					defer mu.Unlock()
					for _, m := range r.Params.Messages {
						for _, c := range m.Content {
							if tc, ok := c.(*mcp.TextContent); ok {
								prompts = append(prompts, tc.Text)
							}
						}
					}
					return &mcp.CreateMessageWithToolsResult{Role: "assistant", Model: "m", Content: []mcp.Content{&mcp.TextContent{Text: "a test response"}}}, nil
				}})

			if res := callTool(t, cs, "test_sampling", map[string]any{"prompt": "Test prompt"}); resultText(res) != "LLM response: a test response" {
				t.Errorf("test_sampling: %q", resultText(res))
			}
			if !slices.Equal(prompts, []string{"Test prompt"}) {
				t.Errorf("sampled prompts %q", prompts)
			}
			res := callTool(t, cs, "test_elicitation", map[string]any{"message": "Please provide your information"})
			if !regexp.MustCompile(`^User response: action=accept, content=\{"email":"test@example.com","username":"testuser"\}$`).MatchString(resultText(res)) {
				t.Errorf("test_elicitation: %q", resultText(res))
			}

			// SEP-1034 and SEP-1330: what matters is the schema asked.
			schemas = nil
			if res := callTool(t, cs, "test_elicitation_sep1034_defaults", nil); !strings.HasPrefix(resultText(res), "Elicitation completed: action=accept") {
				t.Errorf("sep1034: %q", resultText(res))
			}
			if len(schemas) != 1 {
				t.Fatalf("sep1034 asked %d times", len(schemas))
			}
			props, _ := schemas[0]["properties"].(map[string]any)
			for field, def := range map[string]any{"name": "John Doe", "age": 30.0, "score": 95.5, "status": "active", "verified": true} {
				p, _ := props[field].(map[string]any)
				if p["default"] != def {
					t.Errorf("sep1034 %s default %v, want %v", field, p["default"], def)
				}
			}
			schemas = nil
			callTool(t, cs, "test_elicitation_sep1330_enums", nil)
			if len(schemas) != 1 {
				t.Fatalf("sep1330 asked %d times", len(schemas))
			}
			props, _ = schemas[0]["properties"].(map[string]any)
			for _, field := range []string{"untitledSingle", "titledSingle", "legacyEnum", "untitledMulti", "titledMulti"} {
				if props[field] == nil {
					t.Errorf("sep1330: no %s field", field)
				}
			}
		})
	}
}

func TestResourceFixtures(t *testing.T) {
	ts := start(t, nil, nil)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			cs := connect(t, ts, clientOpts{wire: wire})
			list, err := cs.ListResources(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var uris []string
			for _, r := range list.Resources {
				if r.Name == "" || r.Description == "" {
					t.Errorf("resource %s lacks a name or description", r.URI)
				}
				uris = append(uris, r.URI)
			}
			if !slices.Equal(uris, []string{"test://static-binary", "test://static-text", "test://watched-resource"}) {
				t.Errorf("resources %v", uris)
			}
			for uri, want := range map[string]string{
				"test://static-text":       "This is the content of the static text resource.",
				"test://template/123/data": `{"data":"Data for ID: 123","id":"123","templateTest":true}`,
			} {
				res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
				if err != nil {
					t.Fatal(err)
				}
				if c := res.Contents[0]; c.URI != uri || c.MIMEType == "" || c.Text != want {
					t.Errorf("%s: %+v", uri, c)
				}
			}
			res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "test://static-binary"})
			if err != nil || len(res.Contents[0].Blob) == 0 || res.Contents[0].MIMEType != "image/png" {
				t.Fatalf("static-binary: %v %+v", err, res)
			}

			_, err = cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "test://nonexistent-resource-for-conformance-testing"})
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != -32602 || !strings.Contains(string(je.Data), `"uri":"test://nonexistent-resource-for-conformance-testing"`) {
				t.Fatalf("missing resource: %v, want -32602 with data.uri", err)
			}

			if wire == legacy {
				if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
					t.Fatal(err)
				}
				if err := cs.Unsubscribe(t.Context(), &mcp.UnsubscribeParams{URI: "test://watched-resource"}); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestPromptFixtures(t *testing.T) {
	ts := start(t, nil, nil)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			cs := connect(t, ts, clientOpts{wire: wire})
			list, err := cs.ListPrompts(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range list.Prompts {
				if p.Description == "" {
					t.Errorf("prompt %s has no description", p.Name)
				}
			}
			get := func(name string, args map[string]string) string {
				res, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: name, Arguments: args})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				b, _ := json.Marshal(res.Messages)
				return string(b)
			}
			for name, c := range map[string]struct {
				args map[string]string
				want []string
			}{
				"test_simple_prompt":                 {nil, []string{`"role":"user"`, "This is a simple prompt for testing."}},
				"test_prompt_with_arguments":         {map[string]string{"arg1": "testValue1", "arg2": "testValue2"}, []string{"testValue1", "testValue2"}},
				"test_prompt_with_embedded_resource": {map[string]string{"resourceUri": "test://example-resource"}, []string{`"type":"resource"`, "test://example-resource"}},
				"test_prompt_with_image":             {nil, []string{`"type":"image"`, `"mimeType":"image/png"`}},
			} {
				got := get(name, c.args)
				for _, w := range c.want {
					if !strings.Contains(got, w) {
						t.Errorf("%s: %s lacks %s", name, got, w)
					}
				}
			}
			comp, err := cs.Complete(t.Context(), &mcp.CompleteParams{
				Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"},
				Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: "par"},
			})
			if err != nil || !slices.Equal(comp.Completion.Values, []string{"paris", "park", "party"}) {
				t.Fatalf("complete: %v %+v", err, comp)
			}
		})
	}
}

var toolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

func TestToolList(t *testing.T) {
	ts := start(t, nil, nil)
	cs := connect(t, ts, clientOpts{})
	names := func() []string {
		list, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tool := range list.Tools {
			if tool.Description == "" || tool.InputSchema == nil || !toolName.MatchString(tool.Name) {
				t.Errorf("tool %q: description %q, schema %v", tool.Name, tool.Description, tool.InputSchema)
			}
			out = append(out, tool.Name)
		}
		return out
	}
	first := names()
	for range 2 {
		if again := names(); !slices.Equal(first, again) {
			t.Fatalf("tools/list order changed: %v then %v", first, again)
		}
	}
	for _, want := range []string{
		"deploy", "transfer", "guess_number",
		"test_simple_text", "test_image_content", "test_audio_content", "test_embedded_resource", "test_multiple_content_types",
		"test_tool_with_logging", "test_tool_with_progress", "test_error_handling", "test_sampling", "test_elicitation",
		"test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums", "json_schema_2020_12_tool", "test_reconnection",
		"test_missing_capability", "test_streaming_elicitation", "test_logging_tool", "test_trigger_tool_change", "test_trigger_prompt_change",
		"test_input_required_result_elicitation", "test_input_required_result_sampling", "test_input_required_result_list_roots",
		"test_input_required_result_request_state", "test_input_required_result_multiple_inputs", "test_input_required_result_multi_round",
		"test_input_required_result_tampered_state", "test_input_required_result_capabilities",
		"greet", "slow_compute", "failing_job", "protocol_error_job", "confirm_delete", "multi_input", "test_tool_with_task",
	} {
		if !slices.Contains(first, want) {
			t.Errorf("tools/list lacks %s", want)
		}
	}

	// The 2020-12 keywords reach the client verbatim.
	list, _ := cs.ListTools(t.Context(), nil)
	for _, tool := range list.Tools {
		if tool.Name != "json_schema_2020_12_tool" {
			continue
		}
		b, _ := json.Marshal(tool.InputSchema)
		for _, kw := range []string{`"$schema":"https://json-schema.org/draft/2020-12/schema"`, `"$anchor":"addressDef"`, `"allOf"`, `"anyOf"`, `"if"`, `"then"`, `"else"`, `"additionalProperties":false`} {
			if !strings.Contains(string(b), kw) {
				t.Errorf("json_schema_2020_12_tool schema lacks %s: %s", kw, b)
			}
		}
	}
}

func TestListChangeTriggers(t *testing.T) {
	ts := start(t, nil, nil)
	cs := connect(t, ts, clientOpts{wire: legacy})
	callTool(t, cs, "test_trigger_tool_change", nil)
	callTool(t, cs, "test_trigger_prompt_change", nil)
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(tools.Tools, func(tool *mcp.Tool) bool { return tool.Name == "test_transient_tool" }) {
		t.Error("test_trigger_tool_change did not add its tool")
	}
	prompts, err := cs.ListPrompts(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range prompts.Prompts {
		if p.Description == "" {
			t.Errorf("prompt %s has no description", p.Name)
		}
	}
}

func TestOptions(t *testing.T) {
	ts := start(t, nil, &demo.Options{Name: "custom", Version: "9"})
	cs := connect(t, ts, clientOpts{wire: legacy})
	if info := cs.InitializeResult().ServerInfo; info.Name != "custom" || info.Version != "9" {
		t.Fatalf("server info %+v", info)
	}
	ts = start(t, nil, nil)
	cs = connect(t, ts, clientOpts{wire: legacy})
	if info := cs.InitializeResult().ServerInfo; info.Name != demo.DefaultName || info.Version != demo.DefaultVersion {
		t.Fatalf("server info %+v", info)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("NewServer(nil) did not panic")
		}
	}()
	demo.NewServer(nil, nil)
}

// waitFor polls cond for up to two seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}
