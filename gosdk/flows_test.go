package gosdk_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
)

func TestFlowsThroughGoClient(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		name := "2026-07-28"
		if legacy {
			name = "2025-11-25"
		}
		t.Run(name, func(t *testing.T) {
			e := startServer(t, serverOpts{guard: mrtr.Options{Store: useMemory}})
			var guesses atomic.Int32
			cs := connect(t, e, clientOpts{legacy: legacy, sampling: true, elicit: func(r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				if strings.Contains(r.Params.Message, "guess") || r.Params.Message == "higher" || r.Params.Message == "lower" {
					n := guesses.Add(1) * 3 // 3, 6, 9: lower, then... the secret is 7
					if r.Params.Message == "lower" {
						n = 7
					}
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"guess": n}}, nil
				}
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true, "context": "ctx"}}, nil
			}})

			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: prodArgs})
			if err != nil {
				t.Fatal(err)
			}
			if got := resultText(t, res); !strings.HasPrefix(got, "deployed api to production") {
				t.Fatalf("deploy: %q", got)
			}
			// guess: 3 (higher), 6 (higher), 9 (lower), 7: four answers, round 4.
			res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "guess", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			if got := resultText(t, res); got != "correct: 7 after 4 guesses, round 4" {
				t.Fatalf("guess: %q", got)
			}
			pr, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "context_prompt"})
			if err != nil {
				t.Fatal(err)
			}
			if got := pr.Messages[0].Content.(*mcp.TextContent).Text; got != "context: ctx" {
				t.Fatalf("prompt: %q", got)
			}
			rr, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "test://secret"})
			if err != nil {
				t.Fatal(err)
			}
			if got := rr.Contents[0].Text; got != "secret 42" {
				t.Fatalf("resource: %q", got)
			}
			res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "sample"})
			if err != nil {
				t.Fatal(err)
			}
			if got := resultText(t, res); got != "model said Paris" {
				t.Fatalf("sample: %q", got)
			}
		})
	}
}
