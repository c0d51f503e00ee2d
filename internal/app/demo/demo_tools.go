package demo

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/gosdk"
)

// Limits of the demo tools' arguments.
const (
	// MaxAmount is the largest transfer amount.
	MaxAmount = 1_000_000_000
	// MaxGuessRange is the largest guess_number range: a binary search
	// needs at most 10 guesses, so a game fits in the guard's default of
	// 10 pauses per flow.
	MaxGuessRange = 1000
	// DefaultGuessRange is guess_number's max when the call omits it.
	DefaultGuessRange = 100
)

// Transfer fees: FeeBasisPoints of the amount (0.5%), rounded half up to
// the cent, and at least MinFeeCents.
const (
	FeeBasisPoints = 50
	MinFeeCents    = 1
)

// Fee returns the fee in cents of a transfer of amountCents.
func Fee(amountCents int64) int64 {
	fee := (amountCents*FeeBasisPoints + 5000) / 10000
	return max(fee, MinFeeCents)
}

// confirmKey is the input request key of deploy's and transfer's question.
const confirmKey = "confirm"

// guessKey is the input request key of guess_number's question.
const guessKey = "guess"

func approveRequest(message string) mcp.InputRequestMap {
	return mcp.InputRequestMap{confirmKey: form(message, map[string]any{
		"approve": map[string]any{"type": "boolean", "description": "true to go ahead"},
	})}
}

// approval reads the answer to an approveRequest: approved, refused (a
// "no", a decline or a cancel: the flow ends), or neither (ask again).
func approval(r *mcp.ElicitResult) (approved, refusedIt bool) {
	if refused(r) {
		return false, true
	}
	if r.Action != "accept" {
		return false, false
	}
	switch r.Content["approve"] {
	case true:
		return true, false
	case false:
		return false, true
	}
	return false, false
}

func addDemoTools(a *gosdk.Adapter, rnd io.Reader) {
	addDeploy(a)
	addTransfer(a)
	addGuessNumber(a, rnd)
}

type deployArgs struct {
	Service string `json:"service"`
	Env     string `json:"env"`
}

// deployment is deploy's sealed continuation: what the user approves is
// what the second round deploys.
type deployment struct {
	Service string `json:"service"`
	Env     string `json:"env"`
}

func addDeploy(a *gosdk.Adapter) {
	gosdk.AddTool(a, &mcp.Tool{
		Name:        "deploy",
		Description: "Deploys a service to staging or production after the user approves (input_required, key confirm).",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"service": map[string]any{"type": "string", "description": "service name", "minLength": 1, "maxLength": 64,
					"pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*$"},
				"env": map[string]any{"type": "string", "description": "target environment", "enum": []string{"staging", "production"}},
			},
			"required":             []string{"service", "env"},
			"additionalProperties": false,
		},
	}, func(ctx context.Context, req *mcp.CallToolRequest, args deployArgs, flow *gosdk.ToolFlow[deployment]) (*mcp.CallToolResult, error) {
		d, resumed := flow.State()
		if !resumed {
			d = deployment(args)
			return flow.Ask(d, approveRequest(fmt.Sprintf("Deploy %s to %s?", d.Service, d.Env)))
		}
		ans, ok := flow.Elicited(confirmKey)
		if !ok {
			return flow.Ask(d, approveRequest(fmt.Sprintf("Deploy %s to %s? (no answer received)", d.Service, d.Env)))
		}
		approved, refusedIt := approval(ans)
		switch {
		case approved:
			return text(fmt.Sprintf("deployed %s to %s", d.Service, d.Env)), nil
		case refusedIt:
			return toolError(fmt.Sprintf("deployment of %s to %s cancelled (%s)", d.Service, d.Env, answerWord(ans))), nil
		}
		return flow.Ask(d, approveRequest(fmt.Sprintf("Deploy %s to %s? Answer approve true or false.", d.Service, d.Env)))
	})
}

type transferArgs struct {
	From   string  `json:"from"`
	To     string  `json:"to"`
	Amount float64 `json:"amount"`
}

// quote is transfer's sealed continuation: the amount and the fee the
// user is shown are the ones charged, whatever the second round says.
type quote struct {
	From        string `json:"from"`
	To          string `json:"to"`
	AmountCents int64  `json:"amountCents"`
	FeeCents    int64  `json:"feeCents"`
}

func (q quote) describe() string {
	return fmt.Sprintf("%s from %s to %s; fee %s; total %s", cents(q.AmountCents), q.From, q.To, cents(q.FeeCents), cents(q.AmountCents+q.FeeCents))
}

func addTransfer(a *gosdk.Adapter) {
	account := map[string]any{"type": "string", "minLength": 1, "maxLength": 64}
	gosdk.AddTool(a, &mcp.Tool{
		Name: "transfer",
		Description: fmt.Sprintf("Quotes a transfer fee (%.1f%%, rounded to the cent, at least %s), then moves the amount after the user approves (input_required, key confirm).",
			float64(FeeBasisPoints)/100, cents(MinFeeCents)),
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"from":   withDescription(account, "account to debit"),
				"to":     withDescription(account, "account to credit"),
				"amount": map[string]any{"type": "number", "description": "amount, at most two decimals", "exclusiveMinimum": 0, "maximum": MaxAmount},
			},
			"required":             []string{"from", "to", "amount"},
			"additionalProperties": false,
		},
	}, func(ctx context.Context, req *mcp.CallToolRequest, args transferArgs, flow *gosdk.ToolFlow[quote]) (*mcp.CallToolResult, error) {
		q, resumed := flow.State()
		if !resumed {
			if args.From == args.To {
				return toolError("from and to must be different accounts"), nil
			}
			amount, err := toCents(args.Amount)
			if err != nil {
				return toolError(err.Error()), nil
			}
			q = quote{From: args.From, To: args.To, AmountCents: amount, FeeCents: Fee(amount)}
			return flow.Ask(q, approveRequest("Transfer "+q.describe()+"?"))
		}
		ans, ok := flow.Elicited(confirmKey)
		if !ok {
			return flow.Ask(q, approveRequest("Transfer "+q.describe()+"? (no answer received)"))
		}
		approved, refusedIt := approval(ans)
		switch {
		case approved:
			// A real implementation would use flow.ID() as the
			// idempotency key of the ledger write.
			return text(fmt.Sprintf("transferred %s (ref %s)", q.describe(), flow.ID())), nil
		case refusedIt:
			return toolError(fmt.Sprintf("transfer of %s from %s to %s cancelled (%s)", cents(q.AmountCents), q.From, q.To, answerWord(ans))), nil
		}
		return flow.Ask(q, approveRequest("Transfer "+q.describe()+"? Answer approve true or false."))
	})
}

// toCents converts a positive amount with at most two decimals.
func toCents(amount float64) (int64, error) {
	if math.IsNaN(amount) || amount <= 0 || amount > MaxAmount {
		return 0, fmt.Errorf("amount must be greater than 0 and at most %d", MaxAmount)
	}
	c := math.Round(amount * 100)
	if math.Abs(amount*100-c) > 1e-3 {
		return 0, fmt.Errorf("amount must have at most two decimals")
	}
	if c < 1 {
		return 0, fmt.Errorf("amount must be at least 0.01")
	}
	return int64(c), nil
}

// cents formats an amount of cents as units with two decimals.
func cents(c int64) string { return fmt.Sprintf("%d.%02d", c/100, c%100) }

type guessArgs struct {
	Max int `json:"max"`
}

// game is guess_number's sealed continuation. The secret lives only
// here, encrypted inside the requestState.
type game struct {
	Secret  int `json:"secret"`
	Max     int `json:"max"`
	Guesses int `json:"guesses"`
}

func guessRequest(message string) mcp.InputRequestMap {
	return mcp.InputRequestMap{guessKey: form(message, map[string]any{
		"guess": map[string]any{"type": "integer", "description": "your guess"},
	})}
}

func addGuessNumber(a *gosdk.Adapter, rnd io.Reader) {
	rounds := a.Guard().Policy().MaxRounds
	gosdk.AddTool(a, &mcp.Tool{
		Name:        "guess_number",
		Description: "Picks a secret number in [1, max] and asks for guesses (input_required, key guess) with higher/lower hints until one is right.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"max": map[string]any{"type": "integer", "description": "upper end of the range", "minimum": 1, "maximum": MaxGuessRange, "default": DefaultGuessRange},
			},
			"additionalProperties": false,
		},
	}, func(ctx context.Context, req *mcp.CallToolRequest, args guessArgs, flow *gosdk.ToolFlow[game]) (*mcp.CallToolResult, error) {
		g, resumed := flow.State()
		if !resumed {
			if args.Max == 0 {
				args.Max = DefaultGuessRange
			}
			if args.Max < 1 || args.Max > MaxGuessRange {
				return toolError(fmt.Sprintf("max must be between 1 and %d", MaxGuessRange)), nil
			}
			if need := bitsFor(args.Max); need > rounds {
				return toolError(fmt.Sprintf("max %d may need %d guesses, but this server allows %d rounds per call; pick a max of at most %d",
					args.Max, need, rounds, 1<<min(rounds, 30)-1)), nil
			}
			n, err := rand.Int(rnd, big.NewInt(int64(args.Max)))
			if err != nil {
				return nil, fmt.Errorf("guess_number: pick a secret: %w", err)
			}
			g = game{Secret: int(n.Int64()) + 1, Max: args.Max}
			return flow.Ask(g, guessRequest(fmt.Sprintf("Guess a number between 1 and %d.", g.Max)))
		}
		ans, ok := flow.Elicited(guessKey)
		if !ok {
			return flow.Ask(g, guessRequest(fmt.Sprintf("Guess a number between 1 and %d (no guess received).", g.Max)))
		}
		if refused(ans) {
			// The secret stays sealed: without a single-use store the
			// last requestState could be replayed to try again.
			return toolError(fmt.Sprintf("game abandoned after %d guesses (%s)", g.Guesses, answerWord(ans))), nil
		}
		n, valid := wholeNumber(ans.Content["guess"])
		if ans.Action != "accept" || !valid || n < 1 || n > g.Max {
			return flow.Ask(g, guessRequest(fmt.Sprintf("Please guess a whole number between 1 and %d.", g.Max)))
		}
		g.Guesses++
		switch {
		case n < g.Secret:
			return flow.Ask(g, guessRequest(fmt.Sprintf("higher than %d: guess again (1-%d, %s so far).", n, g.Max, guessCount(g.Guesses))))
		case n > g.Secret:
			return flow.Ask(g, guessRequest(fmt.Sprintf("lower than %d: guess again (1-%d, %s so far).", n, g.Max, guessCount(g.Guesses))))
		}
		return text(fmt.Sprintf("correct: %d", g.Secret)), nil
	})
}

// guessCount says "1 guess" or "n guesses".
func guessCount(n int) string {
	if n == 1 {
		return "1 guess"
	}
	return fmt.Sprintf("%d guesses", n)
}

// bitsFor is the number of guesses a binary search over [1, n] may need.
func bitsFor(n int) int {
	b := 0
	for v := n; v > 0; v >>= 1 {
		b++
	}
	return b
}

// wholeNumber reads an integer from a decoded JSON value.
func wholeNumber(v any) (int, bool) {
	switch x := v.(type) {
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1e9 {
			return 0, false
		}
		return int(x), true
	case json.Number:
		n, err := x.Int64()
		if err != nil || n > 1e9 || n < -1e9 {
			return 0, false
		}
		return int(n), true
	case int:
		return x, true
	case int64:
		if x > 1e9 || x < -1e9 {
			return 0, false
		}
		return int(x), true
	}
	return 0, false
}

// answerWord describes how the user refused.
func answerWord(r *mcp.ElicitResult) string {
	if r.Action == "accept" {
		return "not approved"
	}
	return "the user chose to " + r.Action
}

func withDescription(p map[string]any, desc string) map[string]any {
	q := make(map[string]any, len(p)+1)
	for k, v := range p {
		q[k] = v
	}
	q["description"] = desc
	return q
}
