// Package example is an mcp-go server built with mrtr's mcpgo adapter:
// the demo tools deploy and guess_number, and the fixtures the MCP
// conformance suite's input-required-result-* scenarios call, every pause
// sealed by the guard. examples/server serves it; the module's tests run
// clients and the conformance harness against it.
package example

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"maps"
	"math"
	"math/big"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/mcpgo"
)

// MaxGuessRange is the largest guess_number range (ten guesses by binary
// search, within the guard's default of ten pauses per flow);
// DefaultGuessRange is its max when the call gives none.
const (
	MaxGuessRange     = 1000
	DefaultGuessRange = 100
)

// New returns an mcp-go server with the demo tools and the conformance
// fixtures on guard g, and its adapter. rnd picks guess_number's secrets
// (nil: crypto/rand).
func New(g *mrtr.Guard, rnd io.Reader, opts *mcpgo.Options) (*server.MCPServer, *mcpgo.Adapter) {
	if rnd == nil {
		rnd = rand.Reader
	}
	s := server.NewMCPServer("mrtr-mcpgo-example", "1.0.0",
		server.WithToolCapabilities(false), server.WithPromptCapabilities(false))
	a := mcpgo.Install(s, g, opts)
	addDeploy(a)
	addGuessNumber(a, rnd, g.Policy().MaxRounds)
	addFixtures(a)
	return s, a
}

// form is a form-mode elicitation of a flat object, every property required.
func form(message string, props map[string]any) mcp.InputRequest {
	return mcp.NewElicitationInputRequest(mcp.ElicitationParams{Mode: mcp.ElicitationModeForm, Message: message,
		RequestedSchema: map[string]any{"type": "object", "properties": props, "required": slices.Sorted(maps.Keys(props))}})
}

func prop(typ string) map[string]any { return map[string]any{"type": typ} }

func sample(prompt string, maxTokens int) mcp.InputRequest {
	return mcp.NewSamplingInputRequest(mcp.CreateMessageParams{MaxTokens: maxTokens,
		Messages: []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent(prompt)}}})
}

// content returns an elicitation answer's content object.
func content(r *mcp.ElicitationResult) map[string]any {
	m, _ := r.Content.(map[string]any)
	return m
}

// acceptedString returns the non-blank string field of an accepted answer.
func acceptedString(r *mcp.ElicitationResult, field string) (string, bool) {
	if r == nil || r.Action != mcp.ElicitationResponseActionAccept {
		return "", false
	}
	s, ok := content(r)[field].(string)
	return s, ok && strings.TrimSpace(s) != ""
}

// refused reports an answer that declined or cancelled: the flow ends.
func refused(r *mcp.ElicitationResult) bool {
	return r != nil && (r.Action == mcp.ElicitationResponseActionDecline || r.Action == mcp.ElicitationResponseActionCancel)
}

// SampledText is the text of a sampling answer: a map off the wire, a
// TextContent from mcp-go's legacy bridge.
func SampledText(r *mcp.CreateMessageResult) string {
	switch c := r.Content.(type) {
	case mcp.TextContent:
		return c.Text
	case map[string]any:
		s, _ := c["text"].(string)
		return s
	}
	return ""
}

type deployArgs struct {
	Service string `json:"service"`
	Env     string `json:"env"`
}

// addDeploy registers deploy: it asks "confirm" and deploys what the user
// approved, from the sealed continuation.
func addDeploy(a *mcpgo.Adapter) {
	approve := func(msg string) mcp.InputRequests {
		return mcp.InputRequests{"confirm": form(msg, map[string]any{"approve": prop("boolean")})}
	}
	mcpgo.AddTool(a, mcp.NewTool("deploy", mcp.WithDescription("Deploys a service after the user approves (input_required, key confirm)."),
		mcp.WithString("service", mcp.Required()), mcp.WithString("env", mcp.Required(), mcp.Enum("staging", "production"))),
		func(ctx context.Context, req mcp.CallToolRequest, args deployArgs, flow *mcpgo.ToolFlow[deployArgs]) (*mcp.CallToolResult, error) {
			d, resumed := flow.State()
			if !resumed {
				if args.Service == "" || (args.Env != "staging" && args.Env != "production") {
					return mcp.NewToolResultError(`deploy needs a service and env "staging" or "production"`), nil
				}
				return flow.Ask(args, approve(fmt.Sprintf("Deploy %s to %s?", args.Service, args.Env)))
			}
			ans, ok := flow.Elicited("confirm")
			switch {
			case !ok:
				return flow.Ask(d, approve(fmt.Sprintf("Deploy %s to %s? (no answer received)", d.Service, d.Env)))
			case refused(ans) || (ans.Action == mcp.ElicitationResponseActionAccept && content(ans)["approve"] == false):
				return mcp.NewToolResultError(fmt.Sprintf("deployment of %s to %s cancelled", d.Service, d.Env)), nil
			case ans.Action == mcp.ElicitationResponseActionAccept && content(ans)["approve"] == true:
				return mcp.NewToolResultText(fmt.Sprintf("deployed %s to %s", d.Service, d.Env)), nil
			}
			return flow.Ask(d, approve(fmt.Sprintf("Deploy %s to %s? Answer approve true or false.", d.Service, d.Env)))
		})
}

type game struct {
	Secret  int `json:"secret"`
	Max     int `json:"max"`
	Guesses int `json:"guesses"`
}

// addGuessNumber registers guess_number: the secret lives only in the
// sealed requestState; every guess is a round.
func addGuessNumber(a *mcpgo.Adapter, rnd io.Reader, rounds int) {
	ask := func(msg string) mcp.InputRequests {
		return mcp.InputRequests{"guess": form(msg, map[string]any{"guess": prop("integer")})}
	}
	mcpgo.AddTool(a, mcp.NewTool("guess_number", mcp.WithDescription("Guess a secret number kept only in the sealed requestState (key guess)."),
		mcp.WithNumber("max", mcp.Description(fmt.Sprintf("the secret is in [1, max]; default %d", DefaultGuessRange)))),
		func(ctx context.Context, req mcp.CallToolRequest, args struct {
			Max int `json:"max"`
		}, flow *mcpgo.ToolFlow[game]) (*mcp.CallToolResult, error) {
			g, resumed := flow.State()
			if !resumed {
				max := cmpOr(args.Max, DefaultGuessRange)
				if max < 1 || max > MaxGuessRange || bits(max) > rounds {
					return mcp.NewToolResultError(fmt.Sprintf("max must be between 1 and %d, and need at most %d guesses", MaxGuessRange, rounds)), nil
				}
				n, err := rand.Int(rnd, big.NewInt(int64(max)))
				if err != nil {
					return nil, fmt.Errorf("guess_number: pick a secret: %w", err)
				}
				g = game{Secret: int(n.Int64()) + 1, Max: max}
				return flow.Ask(g, ask(fmt.Sprintf("Guess a number between 1 and %d.", g.Max)))
			}
			ans, ok := flow.Elicited("guess")
			if ok && refused(ans) {
				return mcp.NewToolResultError(fmt.Sprintf("game abandoned after %d guesses", g.Guesses)), nil
			}
			var n float64
			if ok && ans.Action == mcp.ElicitationResponseActionAccept {
				n, _ = content(ans)["guess"].(float64)
			}
			if n != math.Trunc(n) || n < 1 || int(n) > g.Max {
				return flow.Ask(g, ask(fmt.Sprintf("Please guess a whole number between 1 and %d.", g.Max)))
			}
			g.Guesses++
			switch {
			case int(n) < g.Secret:
				return flow.Ask(g, ask(fmt.Sprintf("higher than %d: guess again (1-%d, guess %d so far).", int(n), g.Max, g.Guesses)))
			case int(n) > g.Secret:
				return flow.Ask(g, ask(fmt.Sprintf("lower than %d: guess again (1-%d, guess %d so far).", int(n), g.Max, g.Guesses)))
			}
			return mcp.NewToolResultText(fmt.Sprintf("correct: %d", g.Secret)), nil
		})
}

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// bits is the number of guesses a binary search over [1, n] may need.
func bits(n int) int {
	b := 0
	for ; n > 0; n >>= 1 {
		b++
	}
	return b
}
