package mrtr

import (
	"strings"
	"testing"
)

// TestLogCapsTarget: a target as long as a request body may be (a MiB)
// reaches the log cut to 256 bytes, in the refusal line written on every
// rejected resume, the store-outage line and the round-cap line.
func TestLogCapsTarget(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	shown := "target=" + strings.Repeat("x", 253) + "…"
	check := func(t *testing.T, fx *fixture, want string) {
		t.Helper()
		logs := fx.logs.String()
		if !strings.Contains(logs, want) || !strings.Contains(logs, shown+" ") || len(logs) > 2048 {
			t.Fatalf("%d bytes of log, want one line of %q with %q: %.600s", len(logs), want, shown, logs)
		}
	}
	long1 := func() *Request { r := deployReq(); r.Target = long; return r }

	t.Run("refused", func(t *testing.T) {
		fx := newFixture(t, nil)
		_, err := fx.g.Begin(t.Context(), resume(long1(), "not-a-token", nil))
		wantReason(t, err, ReasonInvalid)
		check(t, fx, "requestState rejected")
	})
	t.Run("store outage", func(t *testing.T) {
		fx := newFixture(t, &Options{Store: &brokenStore{}})
		r := long1()
		tok := fx.pause(t, r)
		if _, err := fx.g.Begin(t.Context(), resume(r, tok, nil)); err == nil {
			t.Fatal("resume with the store down accepted")
		}
		check(t, fx, "single-use store failed")
	})
	t.Run("round cap", func(t *testing.T) {
		fx := newFixture(t, &Options{MaxRounds: 1})
		r := long1()
		tok := fx.pause(t, r)
		f, err := fx.g.Begin(t.Context(), resume(r, tok, nil))
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Pause(nil, "k")
		wantReason(t, err, ReasonRoundsExceeded)
		check(t, fx, "flow reached the round cap")
	})
}
