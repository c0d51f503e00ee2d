package reqstate

import (
	"encoding/json"
	"testing"
)

// benchContinuation is the 300-byte continuation of the bench module's
// BenchmarkSealOpen, which compares this codec with other libraries.
var benchContinuation = []byte(`{"step":"confirm","service":"payments-api","environment":"production","image":"ghcr.io/acme/payments-api:2026.11.3","replicas":6,"regions":["eu-west-1","eu-central-1"],"requestedBy":"alice@example.com","changeTicket":"CHG-2026-0042","checks":[{"name":"migrations","passed":true},{"name":"canary","passed":true}]}`)

func benchState(b *testing.B) *State {
	s := testState(b)
	s.Continuation = benchContinuation
	s.Asked = []string{"confirm", "changeTicket"}
	return s
}

func BenchmarkSeal(b *testing.B) {
	c := New(testRing(b, testKey(b, "2026-11", 1)), nil)
	bind := testBinding()
	base := benchState(b)
	b.ReportAllocs()
	for b.Loop() {
		s := *base // a zero JTI, so Seal draws one as in real use
		if _, err := c.Seal(bind, &s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	c := New(testRing(b, testKey(b, "2026-11", 1)), nil)
	bind := testBinding()
	tok := mustSealTB(b, c, bind, benchState(b))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Open(bind, tok); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidJSON(b *testing.B) {
	b.Run("validJSON", func(b *testing.B) {
		b.SetBytes(int64(len(benchContinuation)))
		for b.Loop() {
			validJSON(benchContinuation)
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(benchContinuation)))
		for b.Loop() {
			json.Valid(benchContinuation)
		}
	})
}
