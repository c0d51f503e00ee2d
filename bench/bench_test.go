package bench

import (
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkSealOpen seals the fixture then opens the token and decodes it
// back into the Go types, once per op, for every contender in one run so
// their ratios can be compared on a noisy machine.
func BenchmarkSealOpen(b *testing.B) {
	f := NewFixture()
	for _, c := range Contenders() {
		b.Run(c.Name, func(b *testing.B) {
			b.ReportAllocs()
			var out Opened // reset every op, so each decodes into a zero value
			for b.Loop() {
				token, err := c.C.Seal(f, time.Now())
				if err != nil {
					b.Fatal(err)
				}
				out = Opened{}
				if err := c.C.Open(f.Binding, token, &out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkContinuationJSON is the part of every contender's work that no
// envelope can remove: encoding/json marshaling the continuation and
// unmarshaling it back into the Go type. Run it in the same invocation as
// BenchmarkSealOpen (-bench 'SealOpen|ContinuationJSON') to compare.
func BenchmarkContinuationJSON(b *testing.B) {
	f := NewFixture()
	b.ReportAllocs()
	var out Deploy
	for b.Loop() {
		data, err := json.Marshal(&f.Cont)
		if err != nil {
			b.Fatal(err)
		}
		out = Deploy{}
		if err := json.Unmarshal(data, &out); err != nil {
			b.Fatal(err)
		}
	}
}
