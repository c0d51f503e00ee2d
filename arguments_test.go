package mrtr

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr/reqstate"
)

// TestInexactNumberArguments pins issue 9, item 6 at the guard: a number
// whose canonical form is another number (1234567890123456789 hashes as
// 1234567890123456800) is refused with ErrInvalidArguments wrapping
// reqstate.ErrInexactNumber, when the flow pauses on a first call and in
// Begin on a resume: never sealed, never "arguments_changed".
func TestInexactNumberArguments(t *testing.T) {
	fx := newFixture(t, nil)
	r := deployReq()
	r.Arguments = json.RawMessage(`{"service":"api","env":"production","id":1234567890123456789}`)
	f, err := fx.g.Begin(t.Context(), r) // a first call never fails: the handler may not pause
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Pause(nil, "confirm")
	if !errors.Is(err, ErrInvalidArguments) || !errors.Is(err, reqstate.ErrInexactNumber) || errors.Is(err, ErrRejected) {
		t.Fatalf("Pause: %v, want ErrInvalidArguments wrapping ErrInexactNumber", err)
	}
	if strings.Contains(err.Error(), "1234567890123456789") {
		t.Fatalf("error quotes the value: %v", err)
	}
	if _, ok := f.Paused(); ok {
		t.Fatal("a refused pause is recorded as paused")
	}

	// The neighbour that is the shortest decimal of the same double pauses,
	// and resuming its token with the other id is refused the same way.
	r.Arguments = json.RawMessage(`{"service":"api","env":"production","id":1234567890123456800}`)
	tok := fx.pause(t, r)
	c := resume(r, tok, map[string]any{"confirm": true})
	c.Arguments = json.RawMessage(`{"service":"api","env":"production","id":1234567890123456789}`)
	_, err = fx.g.Begin(t.Context(), c)
	if !errors.Is(err, ErrInvalidArguments) || !errors.Is(err, reqstate.ErrInexactNumber) || errors.Is(err, ErrRejected) {
		t.Fatalf("resume: %v, want ErrInvalidArguments wrapping ErrInexactNumber", err)
	}
	// The token is still good for its own arguments.
	if _, err := fx.g.Begin(t.Context(), resume(r, tok, nil)); err != nil {
		t.Fatalf("resume with the sealed arguments: %v", err)
	}
}
