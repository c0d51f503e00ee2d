package reqstate_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mrtr-go/mrtr/reqstate"
)

// A tool pauses with a typed continuation and resumes from the token the
// client echoed.
func Example() {
	ring, err := reqstate.GenerateKeyRing("2026-11", nil)
	if err != nil {
		panic(err)
	}
	codec := reqstate.New(ring, nil)

	type deploy struct {
		Service string `json:"service"`
		Env     string `json:"env"`
	}
	args := []byte(`{"service":"api","env":"production"}`)
	hash, _ := reqstate.HashArguments(args)
	cont, _ := json.Marshal(deploy{Service: "api", Env: "production"})
	now := time.Now()
	b := reqstate.Binding{
		Method:          "tools/call",
		ProtocolVersion: "2026-07-28",
		Target:          "deploy",
		ServerID:        "api-1",
		Principal:       reqstate.Principal{Issuer: "https://id.example", Subject: "alice"},
	}
	token, err := codec.Seal(b, &reqstate.State{
		Continuation: cont, Round: 1, IssuedAt: now, ExpiresAt: now.Add(5 * time.Minute),
		ArgsHash: hash, Asked: []string{"confirm"},
	})
	if err != nil {
		panic(err)
	}

	// The retry: same binding, same arguments.
	st, err := codec.Open(b, token)
	if err != nil {
		panic(err)
	}
	if err := st.Check(time.Now(), 2*time.Second); err != nil {
		panic(err)
	}
	var d deploy
	if err := json.Unmarshal(st.Continuation, &d); err != nil {
		panic(err)
	}
	fmt.Println("round", st.Round, "asked", st.Asked, "deploy", d.Service, "to", d.Env, "args unchanged:", st.ArgsHash == hash)

	// The same token presented by another caller does not open.
	b.Principal.Subject = "mallory"
	_, err = codec.Open(b, token)
	fmt.Println(errors.Is(err, reqstate.ErrInvalid))
	// Output:
	// round 1 asked [confirm] deploy api to production args unchanged: true
	// true
}

// Rotation: a new key is promoted to primary; tokens sealed under the old
// key still open while it stays in the ring.
func ExampleKeyRing_WithPrimary() {
	old, _ := reqstate.GenerateKeyRing("2026-10", nil)
	next, _ := reqstate.GenerateKey("2026-11", nil)
	rotated, err := old.WithPrimary(next)
	if err != nil {
		panic(err)
	}
	fmt.Println(rotated.IDs(), "primary", rotated.Primary())
	// Output: [2026-11 2026-10] primary 2026-11
}

func ExampleParseKeyRing() {
	_, err := reqstate.ParseKeyRing([]byte(`{"keys":[{"id":"2026-11","secret":"c2hvcnQ="}]}`))
	fmt.Println(err)
	// Output: reqstate: bad key ring: entry 0 (id "2026-11"): secret is 5 bytes, want 32
}

func ExampleHashArguments() {
	a, _ := reqstate.HashArguments([]byte(`{"env": "production", "service": "api"}`))
	b, _ := reqstate.HashArguments([]byte(`{"service":"api","env":"production"}`))
	fmt.Println(a == b, a)
	// Output: true y--h8OjKAE2z9Th8HTaFy57r-yCyH2-HFQ__hk8KHaU
}

func ExampleCanonicalize() {
	out, _ := reqstate.Canonicalize([]byte(`{"b": [1.50, 1e21, -0], "a": "\u00e9"}`))
	fmt.Println(string(out))
	// Output: {"a":"é","b":[1.5,1e+21,0]}
}

// Numbers are hashed by value, whatever their spelling; a number whose
// canonical form would be another number is refused rather than hashed as
// its neighbour.
func ExampleHashArguments_numbers() {
	a, _ := reqstate.HashArguments([]byte(`{"replicas":3,"ratio":0.5}`))
	b, _ := reqstate.HashArguments([]byte(`{"replicas":3.0,"ratio":5e-1}`))
	fmt.Println(a == b)
	_, err := reqstate.HashArguments([]byte(`{"id":1234567890123456789}`))
	fmt.Println(errors.Is(err, reqstate.ErrInexactNumber))
	fmt.Println(err)
	// Output:
	// true
	// true
	// reqstate: cannot canonicalize JSON: number at offset 6 is not exact in an IEEE 754 double (I-JSON, RFC 7493): its canonical form would be another number
}

// A Key or KeyRing shows its ids only, in fmt, log/slog and JSON alike;
// secrets leave a ring only through MarshalSecretJSON.
func ExampleKeyRing_MarshalJSON() {
	ring, _ := reqstate.GenerateKeyRing("2026-11", nil)
	data, _ := json.Marshal(ring)
	fmt.Println(string(data))
	fmt.Printf("%v %x\n", ring, ring.Keys()[0])
	// Output:
	// {"keys":[{"id":"2026-11"}]}
	// reqstate.KeyRing[2026-11] reqstate.Key{ID: "2026-11", Secret: <redacted>}
}
