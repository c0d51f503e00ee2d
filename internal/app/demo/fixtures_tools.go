package demo

import (
	"context"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Texts the conformance suite's descriptions ask for.
const (
	simpleText       = "This is a simple text response for testing."
	embeddedText     = "This is an embedded resource content."
	errorText        = "This tool intentionally returns an error for testing"
	mixedResourceURI = "test://mixed-content-resource"
)

// step is the pause between the notifications of the logging and
// progress fixtures, so a client sees them arrive during the call.
const step = 50 * time.Millisecond

// json202012Schema is the input schema of json_schema_2020_12_tool, kept
// verbatim (raw JSON) so every 2020-12 keyword reaches the client.
const json202012Schema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {
    "address": {
      "$anchor": "addressDef",
      "type": "object",
      "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
    }
  },
  "properties": {
    "name": {"type": "string"},
    "address": {"$ref": "#/$defs/address"},
    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
    "phone": {"type": "string"},
    "email": {"type": "string"}
  },
  "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
  "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
  "then": {"required": ["phone"]},
  "else": {"required": ["email"]},
  "additionalProperties": false
}`

// addContentFixtures registers the tools that answer in one round: the
// content types, errors, logging, progress, schema preservation, stream
// reconnection and the Mcp-Param header fixture.
func addContentFixtures(s *mcp.Server) {
	simple := func(name, desc string, res func() *mcp.CallToolResult) {
		s.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: emptyObject()},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return res(), nil })
	}
	simple("test_simple_text", "Returns one text item.", func() *mcp.CallToolResult { return text(simpleText) })
	simple("test_image_content", "Returns one image item (a 1x1 PNG).", func() *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: pixelPNG(), MIMEType: "image/png"}}}
	})
	simple("test_audio_content", "Returns one audio item (10 ms of WAV silence).", func() *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{Data: silenceWAV(), MIMEType: "audio/wav"}}}
	})
	simple("test_embedded_resource", "Returns one embedded text resource.", func() *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI: "test://embedded-resource", MIMEType: "text/plain", Text: embeddedText,
		}}}}
	})
	simple("test_multiple_content_types", "Returns a text, an image and an embedded resource item.", func() *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "Multiple content types test:"},
			&mcp.ImageContent{Data: pixelPNG(), MIMEType: "image/png"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
				URI: mixedResourceURI, MIMEType: "application/json", Text: `{"test":"data","value":123}`,
			}},
		}}
	})
	simple("test_error_handling", "Always fails with an isError result.", func() *mcp.CallToolResult { return toolError(errorText) })

	s.AddTool(&mcp.Tool{Name: "test_tool_with_logging", Description: "Sends three info log messages while it runs.", InputSchema: emptyObject()},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
				if i > 0 && !sleep(ctx, step) {
					return nil, ctx.Err()
				}
				// Log sends only at or above the level the client set
				// (logging/setLevel, or _meta logLevel on 2026-07-28).
				if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "test_tool_with_logging", Data: msg}); err != nil {
					return nil, err
				}
			}
			return text("Logging test completed: 3 messages sent"), nil
		})

	s.AddTool(&mcp.Tool{Name: "test_tool_with_progress", Description: "Reports progress 0, 50 and 100 of 100 when given a progress token.", InputSchema: emptyObject()},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			tok := req.Params.GetProgressToken()
			for i, p := range []float64{0, 50, 100} {
				if i > 0 && !sleep(ctx, step) {
					return nil, ctx.Err()
				}
				if tok == nil {
					continue
				}
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: p, Total: 100}); err != nil {
					return nil, err
				}
			}
			return text("Progress test completed"), nil
		})

	s.AddTool(&mcp.Tool{Name: "json_schema_2020_12_tool", Description: "Tool with JSON Schema 2020-12 features",
		InputSchema: json.RawMessage(json202012Schema)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("ok"), nil })

	s.AddTool(&mcp.Tool{Name: "test_reconnection", Description: "Closes its SSE stream mid-call (SEP-1699, 2025-11-25 wire) and answers after the client reconnects.",
		InputSchema: emptyObject()},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// The answer reaches the client only if the HTTP handler keeps
			// an event store to replay it from; go-sdk ignores the close on
			// the 2026-07-28 wire and off HTTP.
			if req.Extra != nil && req.Extra.CloseSSEStream != nil {
				req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 500 * time.Millisecond})
			}
			if !sleep(ctx, 100*time.Millisecond) {
				return nil, ctx.Err()
			}
			return text("Reconnection test completed"), nil
		})

	s.AddTool(&mcp.Tool{Name: "test_x_mcp_header", Description: "Echoes a string argument that the client mirrors into the Mcp-Param-Region header (SEP-2243).",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"region": map[string]any{"type": "string", "description": "a region name", "x-mcp-header": "Region"},
			},
			"required": []string{"region"},
		}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Region string `json:"region"`
			}
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return toolError("arguments: want {region: string}"), nil
			}
			return text("region: " + args.Region), nil
		})
}

// sleep waits d, or until ctx is done; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
