package call

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rounds drives the rounds of one request (go-sdk's automatic loop is
// off: it stops after 10 whatever the server allows, and does not say
// whose limit it was).
type rounds struct {
	max    int
	answer func(context.Context, mcp.InputRequestMap) (mcp.InputResponseMap, error)
}

// ErrClientRounds reports that the client's --max-rounds was reached.
var ErrClientRounds = errors.New("this client's round limit was reached")

// run sends the request through step until its result needs no more
// input: step sends the answers and the state of the previous round
// (none on the first) and returns the result's input requests, its
// state and whether it needs input.
func (r *rounds) run(ctx context.Context, step func(mcp.InputResponseMap, string) (mcp.InputRequestMap, string, bool, error)) error {
	var resp mcp.InputResponseMap
	var state string
	answered, busy := 0, 0
	for {
		reqs, next, needs, err := step(resp, state)
		if err != nil {
			return err
		}
		if !needs {
			return nil
		}
		state = next
		if len(reqs) == 0 { // load shedding: ask again with the same answers
			if busy++; busy >= maxBusyRounds {
				return fmt.Errorf("the server is busy: it asked to retry %d times in a row; try again later", busy)
			}
			continue
		}
		busy = 0
		if answered == r.max {
			return fmt.Errorf("%w: the server asked for input a %s time, and --max-rounds is %d (raise it to go on)",
				ErrClientRounds, ordinal(answered+1), r.max)
		}
		if resp, err = r.answer(ctx, reqs); err != nil {
			return err
		}
		answered++
	}
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// inputs answers the server's input requests: forms and sampling at the
// terminal, roots from the flags.
type inputs struct {
	p          *prompter
	roots      []*mcp.Root
	atPrompt   func(context.Context, func(context.Context) error) error
	rootsAsked atomic.Bool // the server asked for roots, in a round or (2025-11-25) by a request
}

func (in *inputs) elicit(ctx context.Context, params *mcp.ElicitParams) (res *mcp.ElicitResult, err error) {
	err = in.atPrompt(ctx, func(ctx context.Context) error {
		res, err = in.p.elicit(ctx, params)
		return err
	})
	return res, err
}

func (in *inputs) sample(ctx context.Context, params *mcp.CreateMessageParams) (res *mcp.CreateMessageResult, err error) {
	err = in.atPrompt(ctx, func(ctx context.Context) error {
		res, err = in.p.sample(ctx, params)
		return err
	})
	return res, err
}

// answer fulfils one round's input requests in key order, one at a
// time: they share the terminal.
func (in *inputs) answer(ctx context.Context, reqs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	resp := make(mcp.InputResponseMap, len(reqs))
	keys := make([]string, 0, len(reqs))
	for k := range reqs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		var r mcp.InputResponse
		var err error
		switch q := reqs[k].(type) {
		case *mcp.ElicitParams:
			r, err = in.elicit(ctx, q)
		case *mcp.CreateMessageParams:
			r, err = in.sample(ctx, q)
		case *mcp.CreateMessageWithToolsParams:
			var msgs []*mcp.SamplingMessage
			for _, m := range q.Messages {
				for _, c := range m.Content {
					msgs = append(msgs, &mcp.SamplingMessage{Role: m.Role, Content: c})
				}
			}
			var res *mcp.CreateMessageResult
			res, err = in.sample(ctx, &mcp.CreateMessageParams{Messages: msgs, SystemPrompt: q.SystemPrompt, MaxTokens: q.MaxTokens})
			if err == nil {
				r = &mcp.CreateMessageWithToolsResult{Content: []mcp.Content{res.Content}, Model: res.Model, Role: res.Role, StopReason: res.StopReason}
			}
		case *mcp.ListRootsParams:
			in.rootsAsked.Store(true)
			if len(in.roots) == 0 {
				err = errors.New("the server asks for roots, but this client offers none (--root URI offers one)")
			}
			r = &mcp.ListRootsResult{Roots: in.roots}
		default:
			err = fmt.Errorf("the server asks for input of a kind this client does not know (%T)", q)
		}
		if err != nil {
			return nil, fmt.Errorf("input request %q: %w", k, err)
		}
		resp[k] = r
	}
	return resp, nil
}

// stringParams returns the parameters of tool whose input schema allows
// only a string (or null). Any failure to list the tools just means no
// coercion: the server has the last word on its arguments.
func stringParams(ctx context.Context, cs *mcp.ClientSession, tool string) map[string]bool {
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil
		}
		if t.Name != tool {
			continue
		}
		data, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil
		}
		var schema struct {
			Properties map[string]struct {
				Type any `json:"type"`
			} `json:"properties"`
		}
		if json.Unmarshal(data, &schema) != nil {
			return nil
		}
		strs := map[string]bool{}
		for k, p := range schema.Properties {
			switch t := p.Type.(type) {
			case string:
				if t == "string" {
					strs[k] = true
				}
			case []any:
				str, only := false, true
				for _, x := range t {
					switch x {
					case "string":
						str = true
					case "null":
					default:
						only = false
					}
				}
				if str && only {
					strs[k] = true
				}
			}
		}
		return strs
	}
	return nil
}
