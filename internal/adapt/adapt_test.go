package adapt

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/reqstate"
)

func TestWire(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
		msg  string
		data string
	}{
		{&mrtr.RejectError{Reason: mrtr.ReasonReplayed}, -32602, "invalid requestState", `{"reason":"replayed"}`},
		{fmt.Errorf("wrapped: %w", &mrtr.RejectError{Reason: mrtr.ReasonExpired}), -32602, "invalid requestState", `{"reason":"expired"}`},
		{fmt.Errorf("%w: redis down", mrtr.ErrStoreUnavailable), -32603, "the single-use store is unavailable; try again", ``},
		{fmt.Errorf("%w: %w", mrtr.ErrInvalidArguments, reqstate.ErrInexactNumber), -32602,
			"invalid params: arguments hold a number with more precision than an IEEE 754 double carries (I-JSON, RFC 7493); send large integers and exact decimals as strings", ``},
		{fmt.Errorf("%w: %w", mrtr.ErrInvalidArguments, reqstate.ErrFoldedNames), -32602,
			"invalid params: arguments hold an object with two member names that differ only in case (such as id and ID), which a decoder matching names case-insensitively would bind to one field", ``},
		{fmt.Errorf("mrtr: seal pause: %w at 2026-11-30T00:00:00Z", reqstate.ErrNoSealingKey), -32603, "internal error", ``},
		{mrtr.ErrHandlerState, -32603, "server bug: a handler set requestState without sealing it", ``},
		{mrtr.ErrInvalidResponses, -32602, "invalid params: inputResponses must be an object of answers", ``},
		{Gate(mcpwire.Caps{}, Needs{{Key: "a", Need: mcpwire.Need{Method: mcpwire.MethodListRoots}}}), -32021, "missing required client capability", `{"requiredCapabilities":{"roots":{}}}`},
	} {
		w := Wire(tc.err)
		if w == nil || w.Code != tc.code || w.Message != tc.msg || string(w.Data) != tc.data {
			t.Errorf("Wire(%v) = %+v, want %d %q %s", tc.err, w, tc.code, tc.msg, tc.data)
		}
	}
	if w := Wire(errors.New("handler failed")); w != nil {
		t.Errorf("a handler's own error mapped to %+v", w)
	}
	if Wire(nil) != nil {
		t.Error("nil mapped")
	}
}

func TestTyped(t *testing.T) {
	type answer struct{ A string }
	if v, ok := Typed[*answer](&answer{"x"}, true); !ok || v.A != "x" {
		t.Errorf("Typed of a *answer: %v %v", v, ok)
	}
	if _, ok := Typed[*answer]((*answer)(nil), true); ok {
		t.Error("a nil *answer counted")
	}
	if _, ok := Typed[*answer]("other", true); ok {
		t.Error("a string counted as *answer")
	}
	if _, ok := Typed[*answer](&answer{}, false); ok {
		t.Error("an absent answer counted")
	}
}

func TestRecord(t *testing.T) {
	var r Record
	r.Add("v1.k.sealed")
	if r.CheckState("v1.k.sealed") != nil || r.CheckState("") != nil {
		t.Error("a sealed or empty state refused")
	}
	if !errors.Is(r.CheckState("step=1"), mrtr.ErrHandlerState) {
		t.Error("a hand-set state passed")
	}
}

// NeedsOf sorts by key (the order Pause seals the asked keys in), and the
// gate costs nothing when the client can answer every request.
func TestNeedsAndGate(t *testing.T) {
	needs := NeedsOf(map[string]string{"b": mcpwire.MethodListRoots, "a": mcpwire.MethodElicit, "c": mcpwire.MethodSampling},
		func(m string) mcpwire.Need { return mcpwire.Need{Method: m} })
	if got := needs.Keys(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("keys %q, want a b c", got)
	}
	if NeedsOf(map[string]string(nil), nil) != nil || Needs(nil).Keys() != nil {
		t.Error("no requests: want nil needs and keys")
	}
	all := mcpwire.Caps{ElicitForm: true, Sampling: true, Roots: true}
	var err error
	if n := testing.AllocsPerRun(100, func() { err = Gate(all, needs) }); n != 0 || err != nil {
		t.Errorf("Gate with every capability: %v allocations, %v; want 0, nil", n, err)
	}
	w := Wire(Gate(mcpwire.Caps{ElicitForm: true}, needs))
	if w == nil || w.Code != -32021 || string(w.Data) != `{"requiredCapabilities":{"roots":{},"sampling":{}}}` {
		t.Errorf("Gate without roots and sampling: %+v", w)
	}
}
