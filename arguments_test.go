package mrtr

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

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

// TestFoldedNameArguments pins issue 18, item 3 at the guard: arguments
// with two member names equal under case folding ({"ID":2,"id":1}, which
// encoding/json binds to id 1, and {"id":1,"ID":2}, which it binds to 2,
// share one RFC 8785 form) are refused with ErrInvalidArguments wrapping
// reqstate.ErrFoldedNames: a first call cannot pause on them, and a token
// sealed for them before the fix (the hash alone would match the swap) is
// refused on the resume, never resumed and never "arguments_changed".
func TestFoldedNameArguments(t *testing.T) {
	fx := newFixture(t, nil)
	r := deployReq()
	r.Target = "delete_record"
	r.Arguments = json.RawMessage(`{"ID":2,"id":1}`)
	f, err := fx.g.Begin(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	wantFolded := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrInvalidArguments) || !errors.Is(err, reqstate.ErrFoldedNames) || errors.Is(err, ErrRejected) {
			t.Fatalf("%s: %v, want ErrInvalidArguments wrapping ErrFoldedNames", what, err)
		}
	}
	_, err = f.Pause(nil, "confirm")
	wantFolded("Pause", err)
	if _, ok := f.Paused(); ok {
		t.Fatal("a refused pause is recorded as paused")
	}

	// A token whose hash is that of the canonical form, as round 1 sealed
	// it before the fix.
	canonical, err := reqstate.Canonicalize(r.Arguments)
	if err != nil {
		t.Fatal(err)
	}
	now := fx.clk.Now()
	tok, err := fx.codec.Seal(r.binding(fx.g.opts.ServerID), &reqstate.State{Round: 1, IssuedAt: now, ExpiresAt: now.Add(time.Minute),
		FlowID: reqstate.ID{1}, ArgsHash: sha256.Sum256(canonical), Asked: []string{"confirm"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{`{"ID":2,"id":1}`, `{"id":1,"ID":2}`, `{"id":1,"ID":2} `} {
		c := resume(r, tok, map[string]any{"confirm": true})
		c.Arguments = json.RawMessage(args)
		_, err := fx.g.Begin(t.Context(), c)
		wantFolded("resume with "+args, err)
	}
	// Nested, and inside arrays, the same.
	for _, args := range []string{`{"record":{"Id":1,"iD":2}}`, `{"records":[{"id":1},{"s":1,"ſ":2}]}`} {
		r.Arguments = json.RawMessage(args)
		f, err := fx.g.Begin(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Pause(nil, "confirm")
		wantFolded("Pause with "+args, err)
	}
}
