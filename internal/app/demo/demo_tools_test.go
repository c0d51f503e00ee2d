package demo_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/app/demo"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

func TestDeploy(t *testing.T) {
	ts := start(t, nil, nil)
	args := map[string]any{"service": "api", "env": "production"}
	cases := []struct {
		name    string
		answer  *mcp.ElicitResult
		isError bool
		text    string
	}{
		{"approve", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, false, "^deployed api to production$"},
		{"reject", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": false}}, true, "cancelled"},
		{"decline", &mcp.ElicitResult{Action: "decline"}, true, "decline"},
		{"cancel", &mcp.ElicitResult{Action: "cancel"}, true, "cancel"},
	}
	for _, wire := range wires {
		for _, c := range cases {
			t.Run(wire+"/"+c.name, func(t *testing.T) {
				var asked []string
				cs := connect(t, ts, clientOpts{wire: wire, elicit: func(r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked = append(asked, r.Params.Message)
					return c.answer, nil
				}})
				res := callTool(t, cs, "deploy", args)
				if res.IsError != c.isError || !regexp.MustCompile(c.text).MatchString(resultText(res)) {
					t.Fatalf("isError %v text %q, want isError %v text matching %q", res.IsError, resultText(res), c.isError, c.text)
				}
				if len(asked) != 1 || asked[0] != "Deploy api to production?" {
					t.Fatalf("asked %q, want one confirmation", asked)
				}
			})
		}
	}
}

func TestDeployRejectsBadArguments(t *testing.T) {
	ts := start(t, nil, nil)
	for _, wire := range wires {
		cs := connect(t, ts, clientOpts{wire: wire, elicit: accept(map[string]any{"approve": true})})
		for _, args := range []map[string]any{
			{"service": "api", "env": "prod"},
			{"service": "", "env": "staging"},
			{"service": "api"},
			{"service": "api; rm -rf /", "env": "staging"},
			{"service": "api", "env": "staging", "extra": 1},
		} {
			if res := callTool(t, cs, "deploy", args); !res.IsError {
				t.Errorf("%s: deploy %v: %q, want an isError result", wire, args, resultText(res))
			}
		}
	}
}

// The second round acts on the sealed continuation: a retry with other
// arguments than the paused call's is refused by the guard.
func TestDeploySealedContinuation(t *testing.T) {
	ts := start(t, nil, nil)
	cs := connect(t, ts, clientOpts{manual: true})
	res := callTool(t, cs, "deploy", map[string]any{"service": "api", "env": "staging"})
	if !res.NeedsInput() || res.RequestState == "" || res.InputRequests["confirm"] == nil {
		t.Fatalf("round 1 did not pause with confirm: %+v", res)
	}
	answers := mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}}
	_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{"service": "api", "env": "production"},
		InputResponses: answers, RequestState: res.RequestState})
	wantRejected(t, err, mrtr.ReasonArgumentsChanged)

	done, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{"service": "api", "env": "staging"},
		InputResponses: answers, RequestState: res.RequestState})
	if err != nil || resultText(done) != "deployed api to staging" {
		t.Fatalf("round 2: %v %v, want deployed api to staging", err, done)
	}
}

func TestFee(t *testing.T) {
	for _, c := range []struct{ amount, fee int64 }{
		{1, 1}, {99, 1}, {100, 1}, {300, 2}, {10000, 50}, {12345, 62}, {12300, 62}, {12299, 61}, {100000000000, 500000000},
	} {
		if got := demo.Fee(c.amount); got != c.fee {
			t.Errorf("Fee(%d) = %d, want %d", c.amount, got, c.fee)
		}
	}
}

func TestTransfer(t *testing.T) {
	ts := start(t, nil, nil)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			var asked string
			cs := connect(t, ts, clientOpts{wire: wire, elicit: func(r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked = r.Params.Message
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
			}})
			res := callTool(t, cs, "transfer", map[string]any{"from": "alice", "to": "bob", "amount": 123.45})
			txt := resultText(res)
			if res.IsError || !strings.Contains(txt, "transferred") || !strings.Contains(txt, "fee 0.62") || !strings.Contains(txt, "123.45") || !strings.Contains(txt, "total 124.07") {
				t.Fatalf("isError %v text %q, want transferred 123.45 with fee 0.62", res.IsError, txt)
			}
			if !strings.Contains(asked, "fee 0.62") {
				t.Fatalf("the confirmation %q does not show the fee", asked)
			}

			cs = connect(t, ts, clientOpts{wire: wire, elicit: func(*mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}})
			if res := callTool(t, cs, "transfer", map[string]any{"from": "alice", "to": "bob", "amount": 5}); !res.IsError || strings.Contains(resultText(res), "transferred") {
				t.Fatalf("declined transfer: isError %v text %q", res.IsError, resultText(res))
			}
		})
	}
}

func TestTransferRejectsBadArguments(t *testing.T) {
	ts := start(t, nil, nil)
	cs := connect(t, ts, clientOpts{elicit: accept(map[string]any{"approve": true})})
	for _, args := range []map[string]any{
		{"from": "alice", "to": "bob", "amount": 0},
		{"from": "alice", "to": "bob", "amount": -5},
		{"from": "alice", "to": "bob", "amount": 1.005},
		{"from": "alice", "to": "bob", "amount": 2e9},
		{"from": "alice", "to": "alice", "amount": 10},
		{"from": "", "to": "bob", "amount": 10},
		{"from": "alice", "to": "bob"},
	} {
		if res := callTool(t, cs, "transfer", args); !res.IsError {
			t.Errorf("transfer %v: %q, want an isError result", args, resultText(res))
		}
	}
}

// binarySearch answers guess_number's questions from the hints.
type binarySearch struct {
	mu      sync.Mutex
	lo, hi  int
	last    int
	guesses int
	asked   []string
}

var hint = regexp.MustCompile(`^(higher|lower) than (\d+)`)

func (b *binarySearch) answer(msg string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked = append(b.asked, msg)
	if m := hint.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[2])
		if m[1] == "higher" {
			b.lo = n + 1
		} else {
			b.hi = n - 1
		}
	}
	b.last = (b.lo + b.hi) / 2
	b.guesses++
	return b.last
}

func TestGuessNumberConverges(t *testing.T) {
	ts := start(t, nil, nil)
	for _, wire := range wires {
		for _, max := range []int{1, 2, 100} {
			t.Run(fmt.Sprintf("%s/max=%d", wire, max), func(t *testing.T) {
				for range 3 {
					b := &binarySearch{lo: 1, hi: max}
					cs := connect(t, ts, clientOpts{wire: wire, elicit: func(r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"guess": b.answer(r.Params.Message)}}, nil
					}})
					res := callTool(t, cs, "guess_number", map[string]any{"max": max})
					if want := fmt.Sprintf("correct: %d", b.last); res.IsError || resultText(res) != want {
						t.Fatalf("result %q (isError %v) after %q, want %q", resultText(res), res.IsError, b.asked, want)
					}
					if b.guesses > 7 {
						t.Fatalf("%d guesses for max %d: the hints do not halve the range (%q)", b.guesses, max, b.asked)
					}
				}
			})
		}
	}
}

// guess_number with the default max, played by hand on the 2026-07-28
// wire: the secret is only in the encrypted requestState, which does not
// hold the continuation in clear, and a tampered state is refused.
func TestGuessNumberSecretIsSealed(t *testing.T) {
	ts := start(t, nil, nil)
	cs := connect(t, ts, clientOpts{manual: true})
	b := &binarySearch{lo: 1, hi: 100}
	res := callTool(t, cs, "guess_number", map[string]any{})
	var states []string
	for res.NeedsInput() {
		if res.InputRequests["guess"] == nil || res.RequestState == "" {
			t.Fatalf("pause without guess or state: %+v", res)
		}
		states = append(states, res.RequestState)
		msg := res.InputRequests["guess"].(*mcp.ElicitParams).Message
		var err error
		res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "guess_number", Arguments: map[string]any{},
			InputResponses: mcp.InputResponseMap{"guess": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"guess": b.answer(msg)}}},
			RequestState:   res.RequestState})
		if err != nil {
			t.Fatal(err)
		}
		if len(states) > 10 {
			t.Fatal("no convergence")
		}
	}
	secret := b.last
	if resultText(res) != fmt.Sprintf("correct: %d", secret) {
		t.Fatalf("result %q, want correct: %d", resultText(res), secret)
	}
	for i, st := range states {
		if i > 0 && st == states[i-1] {
			t.Fatalf("round %d reused the previous requestState", i+1)
		}
		cont := fmt.Sprintf(`{"secret":%d`, secret)
		parts := strings.Split(st, ".")
		body, err := base64.RawURLEncoding.DecodeString(parts[len(parts)-1])
		if err != nil {
			t.Fatalf("requestState %d: body is not base64url: %v", i+1, err)
		}
		for _, s := range []string{st, string(body)} {
			if strings.Contains(s, cont) || strings.Contains(s, "secret") || strings.Contains(s, `"max"`) {
				t.Fatalf("requestState %d holds the continuation in clear", i+1)
			}
		}
	}

	// Tampering with any state, even by appending, is refused before the
	// handler runs.
	last := states[len(states)-1]
	for _, bad := range []string{last + "-TAMPERED", flip(last, len(last)/2), flip(last, len(last)-1), flip(last, 3)} {
		_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "guess_number", Arguments: map[string]any{},
			InputResponses: mcp.InputResponseMap{"guess": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"guess": secret}}},
			RequestState:   bad})
		wantRejected(t, err, mrtr.ReasonInvalid)
	}
}

// flip changes one character of s.
func flip(s string, i int) string {
	c := byte('A')
	if s[i] == 'A' {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}

func TestGuessNumberRejectsBadArguments(t *testing.T) {
	ts := start(t, nil, nil)
	cs := connect(t, ts, clientOpts{elicit: accept(map[string]any{"guess": 1})})
	for _, args := range []map[string]any{{"max": 0}, {"max": -3}, {"max": 1001}, {"max": 2.5}, {"max": "ten"}} {
		if res := callTool(t, cs, "guess_number", args); !res.IsError {
			t.Errorf("guess_number %v: %q, want an isError result", args, resultText(res))
		}
	}

	// A guard allowing fewer pauses than a binary search may need.
	small := start(t, &mrtr.Options{MaxRounds: 4}, nil)
	cs = connect(t, small, clientOpts{elicit: accept(map[string]any{"guess": 1})})
	if res := callTool(t, cs, "guess_number", map[string]any{"max": 100}); !res.IsError || !strings.Contains(resultText(res), "at most 15") {
		t.Fatalf("max 100 with 4 rounds: %q, want an isError result suggesting 15", resultText(res))
	}
}

// Invalid or missing guesses are asked again (the go-sdk client checks
// answers against the schema, so they are sent by hand); a decline ends
// the game without revealing the secret.
func TestGuessNumberBadAnswers(t *testing.T) {
	ts := start(t, nil, nil)
	cs := connect(t, ts, clientOpts{manual: true})
	args := map[string]any{"max": 10}
	res := callTool(t, cs, "guess_number", args)
	for _, bad := range []mcp.InputResponse{
		&mcp.ElicitResult{Action: "accept", Content: map[string]any{"guess": 2.5}},
		&mcp.ElicitResult{Action: "accept", Content: map[string]any{"guess": 0}},
		&mcp.ElicitResult{Action: "accept", Content: map[string]any{"guess": "five"}},
		&mcp.ElicitResult{Action: "accept", Content: map[string]any{}},
		&mcp.ListRootsResult{},
	} {
		next, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "guess_number", Arguments: args,
			InputResponses: mcp.InputResponseMap{"guess": bad}, RequestState: res.RequestState})
		if err != nil {
			t.Fatal(err)
		}
		if !next.NeedsInput() || next.InputRequests["guess"] == nil {
			t.Fatalf("answer %+v: %+v, want the guess asked again", bad, next)
		}
		res = next
	}
	if msg := res.InputRequests["guess"].(*mcp.ElicitParams).Message; !strings.Contains(msg, "between 1 and 10") {
		t.Fatalf("re-ask %q", msg)
	}
	end, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "guess_number", Arguments: args,
		InputResponses: mcp.InputResponseMap{"guess": &mcp.ElicitResult{Action: "decline"}}, RequestState: res.RequestState})
	if err != nil {
		t.Fatal(err)
	}
	if !end.IsError || resultText(end) != "game abandoned after 0 guesses (the user chose to decline)" {
		t.Fatalf("result %q (isError %v), want an abandoned game", resultText(end), end.IsError)
	}
}

// With a single-use store (mrtr serve's default), each state opens once.
func TestGuessNumberSingleUse(t *testing.T) {
	ts := start(t, &mrtr.Options{Store: replay.NewMemory(nil)}, nil)
	cs := connect(t, ts, clientOpts{manual: true})
	res := callTool(t, cs, "guess_number", map[string]any{"max": 1000})
	params := &mcp.CallToolParams{Name: "guess_number", Arguments: map[string]any{"max": 1000},
		InputResponses: mcp.InputResponseMap{"guess": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"guess": 500}}},
		RequestState:   res.RequestState}
	if _, err := cs.CallTool(t.Context(), params); err != nil {
		t.Fatal(err)
	}
	_, err := cs.CallTool(t.Context(), params)
	wantRejected(t, err, mrtr.ReasonReplayed)
}

// Over an in-memory transport (as over stdio) there is no HTTP request:
// no headers, no bearer token, an anonymous caller. The demo tools work
// the same.
func TestDemoToolsInMemory(t *testing.T) {
	ring, err := reqstate.GenerateKeyRing("mem", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := demo.NewServer(mrtr.New(reqstate.New(ring, nil), nil), nil)
	b := &binarySearch{lo: 1, hi: 50}
	c := mcp.NewClient(&mcp.Implementation{Name: "mem", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if strings.HasPrefix(r.Params.Message, "Deploy") {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"guess": b.answer(r.Params.Message)}}, nil
		},
	})
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := c.Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if res := callTool(t, cs, "deploy", map[string]any{"service": "web", "env": "staging"}); resultText(res) != "deployed web to staging" {
		t.Fatalf("deploy: %q", resultText(res))
	}
	if res := callTool(t, cs, "guess_number", map[string]any{"max": 50}); resultText(res) != fmt.Sprintf("correct: %d", b.last) {
		t.Fatalf("guess_number: %q after %q", resultText(res), b.asked)
	}
}
