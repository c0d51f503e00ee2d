package bench

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/reqstate"
)

// TestRoundTrip proves every contender measures a working path: what it
// opens equals what it sealed, jtis are fresh, and (except for the bare
// floor) a token does not open under another binding or once altered.
func TestRoundTrip(t *testing.T) {
	f := NewFixture()
	if n := len(f.ContJSON); n < 250 || n > 350 {
		t.Errorf("continuation is %d bytes of JSON, want about 300", n)
	}
	now := time.Now()
	iat, exp := Window(now)
	for _, c := range Contenders() {
		t.Run(c.Name, func(t *testing.T) {
			token, err := c.C.Seal(f, now)
			if err != nil {
				t.Fatalf("seal: %v", err)
			}
			token2, err := c.C.Seal(f, now)
			if err != nil {
				t.Fatalf("seal: %v", err)
			}
			if token == token2 {
				t.Error("two seals gave the same token")
			}
			var out Opened
			if err := c.C.Open(f.Binding, token, &out); err != nil {
				t.Fatalf("open: %v", err)
			}
			t.Logf("token: %d bytes", len(token))

			if c.Name == "floor" {
				if !bytes.Equal(out.Raw, f.ContJSON) {
					t.Fatalf("opened %q, want %q", out.Raw, f.ContJSON)
				}
				return
			}
			if !reflect.DeepEqual(out.Cont, f.Cont) {
				t.Errorf("continuation = %+v, want %+v", out.Cont, f.Cont)
			}
			want := f.Meta
			want.IssuedAt, want.ExpiresAt = iat, exp
			if out.Meta.JTI.IsZero() {
				t.Error("jti not filled")
			}
			var out2 Opened
			if err := c.C.Open(f.Binding, token2, &out2); err != nil {
				t.Fatalf("open second: %v", err)
			}
			if out2.Meta.JTI == out.Meta.JTI {
				t.Error("two seals gave the same jti")
			}
			want.JTI = out.Meta.JTI
			if !out.Meta.IssuedAt.Equal(iat) || !out.Meta.ExpiresAt.Equal(exp) {
				t.Errorf("window = %v..%v, want %v..%v", out.Meta.IssuedAt, out.Meta.ExpiresAt, iat, exp)
			}
			out.Meta.IssuedAt, out.Meta.ExpiresAt = iat, exp
			if !reflect.DeepEqual(out.Meta, want) {
				t.Errorf("meta = %+v, want %+v", out.Meta, want)
			}

			// Every field of the binding is bound.
			for name, mutate := range map[string]func(*reqstate.Binding){
				"method":    func(b *reqstate.Binding) { b.Method = "prompts/get" },
				"protocol":  func(b *reqstate.Binding) { b.ProtocolVersion = "2025-06-18" },
				"target":    func(b *reqstate.Binding) { b.Target = "rollback" },
				"server":    func(b *reqstate.Binding) { b.ServerID = "api-2" },
				"issuer":    func(b *reqstate.Binding) { b.Principal.Issuer = "https://evil.example" },
				"subject":   func(b *reqstate.Binding) { b.Principal.Subject = "mallory" },
				"anonymous": func(b *reqstate.Binding) { b.Principal = reqstate.Principal{} },
			} {
				b := f.Binding
				mutate(&b)
				if err := c.C.Open(b, token, new(Opened)); err == nil {
					t.Errorf("opened under another %s", name)
				}
			}
			// An altered token does not open. (Not the last character: in
			// jose and securecookie tokens its unused low bits can change
			// without changing the decoded bytes. reqstate's own tests cover
			// its non-malleability.)
			for _, i := range []int{0, len(token) / 3, len(token) / 2, len(token) * 2 / 3} {
				bad := []byte(token)
				if bad[i] == 'A' {
					bad[i] = 'B'
				} else {
					bad[i] = 'A'
				}
				if err := c.C.Open(f.Binding, string(bad), new(Opened)); err == nil {
					t.Errorf("opened with byte %d altered", i)
				}
			}
		})
	}
}

// TestFixtureJSON pins the continuation's JSON form, so every contender
// encodes the same bytes.
func TestFixtureJSON(t *testing.T) {
	f := NewFixture()
	var back Deploy
	if err := json.Unmarshal(f.ContJSON, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, f.Cont) {
		t.Fatalf("fixture does not round-trip: %+v", back)
	}
}
