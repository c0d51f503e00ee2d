package mrtr

import (
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/reqstate"
)

// TestAnonymousTTLNeverExceedsTTL pins issue 9 item 11 in the library:
// an anonymous token never outlives an authenticated one, whether
// AnonymousTTL is left at its default or set longer than TTL.
func TestAnonymousTTLNeverExceedsTTL(t *testing.T) {
	for _, tc := range []struct {
		name          string
		ttl, anon     time.Duration
		wantAnonymous time.Duration
	}{
		{"default anonymous, short ttl", 2 * time.Second, 0, 2 * time.Second},
		{"longer anonymous", 10 * time.Second, time.Minute, 10 * time.Second},
		{"shorter anonymous kept", time.Hour, 30 * time.Second, 30 * time.Second},
		{"defaults", 0, 0, DefaultAnonymousTTL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t, &Options{TTL: tc.ttl, AnonymousTTL: tc.anon, Leeway: -1})
			if got := fx.g.Policy().AnonymousTTL; got != tc.wantAnonymous {
				t.Fatalf("AnonymousTTL %v, want %v", got, tc.wantAnonymous)
			}
			r := deployReq()
			r.Principal = reqstate.Principal{}
			tok := fx.pause(t, r)
			fx.clk.Advance(tc.wantAnonymous)
			f, err := fx.g.Begin(t.Context(), resume(r, tok, map[string]any{"confirm": "yes"}))
			if err != nil {
				t.Fatalf("resume at the anonymous lifetime: %v", err)
			}
			f.End(t.Context(), nil)
			tok = fx.pause(t, r)
			fx.clk.Advance(tc.wantAnonymous + time.Second)
			_, err = fx.g.Begin(t.Context(), resume(r, tok, map[string]any{"confirm": "yes"}))
			wantReason(t, err, ReasonExpired)
		})
	}
}
