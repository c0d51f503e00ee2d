package mrtr_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

type deploy struct {
	Service string `json:"service"`
	Env     string `json:"env"`
}

// A two-round flow seen from the guard: the first call pauses with a
// typed continuation; the resume gets it back, verified, with only the
// answers it asked for. A second use of the same token is refused.
func Example() {
	ctx := context.Background()
	ring, _ := reqstate.GenerateKeyRing("2026-11", nil)
	g := mrtr.New(reqstate.New(ring, nil), &mrtr.Options{ServerID: "api", Store: replay.NewMemory(nil)})
	call := mrtr.Request{
		Method: "tools/call", ProtocolVersion: "2026-07-28", Target: "deploy",
		Principal: reqstate.Principal{Issuer: "https://id.example", Subject: "alice"},
		Arguments: json.RawMessage(`{"service":"api","env":"production"}`),
	}

	f, _ := g.Begin(ctx, &call)
	state, _ := f.Pause(deploy{"api", "production"}, "confirm")
	f.End(ctx, nil)

	call.RequestState = state
	call.InputResponses = map[string]any{
		"confirm":  json.RawMessage(`{"action":"accept","content":{"approve":true}}`),
		"injected": json.RawMessage(`{"action":"accept"}`),
	}
	f, err := g.Begin(ctx, &call)
	if err != nil {
		panic(err)
	}
	d, _, _ := mrtr.Decode[deploy](f)
	_, injected := f.Answer("injected")
	fmt.Println("round", f.Round(), "deploy", d.Service, "to", d.Env, "injected answer seen:", injected)
	f.End(ctx, nil)

	_, err = g.Begin(ctx, &call)
	var re *mrtr.RejectError
	fmt.Println(errors.As(err, &re), re.Reason)
	// Output:
	// round 1 deploy api to production injected answer seen: false
	// true replayed
}

// A handler with a side effect, under the default policy: single use
// guarantees at most one successful run per token, and a run that fails
// releases the token so the user can retry. The retry runs the handler
// again on the same token; keyed by the flow id and round, the side effect
// still happens once. (Options.ConsumeOnError would refuse the retry
// instead.)
func ExampleFlow_ID() {
	ctx := context.Background()
	ring, _ := reqstate.GenerateKeyRing("2026-11", nil)
	g := mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: replay.NewMemory(nil)})
	call := mrtr.Request{
		Method: "tools/call", ProtocolVersion: "2026-07-28", Target: "transfer",
		Principal: reqstate.Principal{Issuer: "https://id.example", Subject: "alice"},
		Arguments: json.RawMessage(`{"amount":100}`),
	}
	f, _ := g.Begin(ctx, &call)
	call.RequestState, _ = f.Pause(nil, "confirm") // "transfer 100?"
	f.End(ctx, nil)

	// The ledger: in a real service, one table with a unique key column,
	// written in the same transaction as the transfer.
	applied := map[string]bool{}
	balance := 1000
	notifyDown := true
	transfer := func(f *mrtr.Flow) error {
		key := f.ID() + "/" + strconv.Itoa(f.Round())
		if !applied[key] {
			balance -= 100
			applied[key] = true
		}
		if notifyDown { // a transient failure after the side effect
			notifyDown = false
			return errors.New("notification service unavailable")
		}
		return nil
	}

	for attempt := 1; attempt <= 3; attempt++ {
		f, err := g.Begin(ctx, &call)
		if err != nil {
			var re *mrtr.RejectError
			errors.As(err, &re)
			fmt.Printf("attempt %d: refused, %s\n", attempt, re.Reason)
			continue
		}
		err = transfer(f)
		f.End(ctx, err)
		fmt.Printf("attempt %d: error %v, balance %d\n", attempt, err, balance)
	}
	// Output:
	// attempt 1: error notification service unavailable, balance 900
	// attempt 2: error <nil>, balance 900
	// attempt 3: refused, replayed
}
