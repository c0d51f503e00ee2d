package mrtr

import (
	"encoding/json"
	"errors"
	"testing"
)

// The checks of a resume's shape live in the guard, so every front end
// (gosdk, mcpgo, the proxy) decides them alike: inputResponses that are
// not an object of answers are refused before anything else, on a first
// call as on a resume; a requestState that is not a string is invalid.
func TestBadResponsesAndState(t *testing.T) {
	fx := newFixture(t, nil)
	f, err := fx.g.Begin(t.Context(), deployReq())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := f.Pause(deployCont{"api", "production"}, "confirm")
	if err != nil {
		t.Fatal(err)
	}
	f.End(t.Context(), nil)

	first := deployReq()
	first.BadResponses = true
	if _, err := fx.g.Begin(t.Context(), first); !errors.Is(err, ErrInvalidResponses) {
		t.Fatalf("first call with bad inputResponses: %v, want ErrInvalidResponses", err)
	}
	res := resume(deployReq(), tok, map[string]any{"confirm": json.RawMessage(`{"action":"accept"}`)})
	res.BadResponses = true
	if _, err := fx.g.Begin(t.Context(), res); !errors.Is(err, ErrInvalidResponses) {
		t.Fatalf("resume with bad inputResponses: %v, want ErrInvalidResponses", err)
	}
	bad := deployReq()
	bad.BadState = true
	var re *RejectError
	if _, err := fx.g.Begin(t.Context(), bad); !errors.As(err, &re) || re.Reason != ReasonInvalid {
		t.Fatalf("requestState not a string: %v, want ReasonInvalid", err)
	}
	// The token itself was not spent by the refusals above.
	if _, err := fx.g.Begin(t.Context(), resume(deployReq(), tok, nil)); err != nil {
		t.Fatalf("the token after refused calls: %v", err)
	}
}

// A *json.RawMessage receives the sealed continuation as sealed.
func TestContinuationRaw(t *testing.T) {
	fx := newFixture(t, nil)
	f, err := fx.g.Begin(t.Context(), deployReq())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := f.Pause(json.RawMessage(`{"s":"up\u00e9 state"}`), "confirm")
	if err != nil {
		t.Fatal(err)
	}
	f2, err := fx.g.Begin(t.Context(), resume(deployReq(), tok, nil))
	if err != nil {
		t.Fatal(err)
	}
	var raw json.RawMessage
	if err := f2.Continuation(&raw); err != nil || string(raw) != `{"s":"up\u00e9 state"}` {
		t.Fatalf("raw continuation %s, %v", raw, err)
	}
}
