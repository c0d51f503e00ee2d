package mrtr_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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
