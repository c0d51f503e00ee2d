package reqstate

import (
	"encoding/json"
	"strings"
	"testing"
)

// validJSONCases are the edges of the JSON grammar and of encoding/json's
// scanner; validJSON must judge each exactly as json.Valid does.
func validJSONCases() []string {
	deep := func(n int, open, close string) string {
		return strings.Repeat(open, n) + strings.Repeat(close, n)
	}
	// A special byte at every position of a long string, so every lane of
	// the eight-byte skip in jsonString meets each kind.
	var lanes []string
	for _, special := range []string{"\x00", "\x1f", "\x20", `"`, `\\`, `\"`, `\n`, `\u00e9`, `\q`, "\x7f", "\x80", "\xff"} {
		for at := range 20 {
			lanes = append(lanes, `["`+strings.Repeat("a", at)+special+strings.Repeat("b", 19-at)+`"]`)
		}
	}
	return append(lanes,
		``, ` `, "\t\r\n ", `null`, ` null `, `nul`, `nulll`, `true`, `tru`, `false`, `falsy`, `True`,
		`0`, `-0`, `01`, `-01`, `-`, `+1`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1e-5`, `1E5`, `1.5e+10`,
		`-1.0e-0`, `1ee5`, `1.5.5`, `0x10`, `1 2`, `Infinity`, `NaN`, `-Infinity`, `123abc`,
		`""`, `"`, `"abc`, `"a\"b"`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\a"`, `"\x41"`, `"\u"`, `"\u12"`,
		`"\u12G4"`, `"\uABCD"`, `"\uabcd"`, `"\ud800"`, "\"\x00\"", "\"\x1f\"", "\"\x7f\"", "\"\xff\xfe\"",
		"\"\xc3\"", `"é"`, `"\`, `"\"`, "\"a\nb\"",
		`[]`, `[ ]`, `[`, `]`, `[1,]`, `[,1]`, `[1 2]`, `[1,,2]`, `[[]]`, `[[],[]]`, `[1,[2,[3]]]`, `[}`, `{]`,
		`{}`, `{ }`, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1}`, `{"a":1,}`, `{,"a":1}`, `{"a":1 "b":2}`,
		`{"a" : 1 , "b" : [ true , null ] }`, `{1:2}`, `{a:1}`, `{'a':1}`, `{"a":1}}`, `{"a":{"b":{}}}`,
		`{"a":[{"b":[]}]}`, `[{"a":1},{"b":2}]`, `{"a":1}x`, "\ufeff{}", `{"a":1,"a":2}`,
		"[1,\n2\t,\r3 ]", `[1]]`, `[[1]`, `{"a":[1}`, `["a":1]`,
		deep(maxValidDepth, "[", "]"), deep(maxValidDepth+1, "[", "]"),
		deep(3, `{"a":`, "}"), // members without a value
		strings.Repeat(`{"a":`, maxValidDepth)+"1"+strings.Repeat("}", maxValidDepth),
		strings.Repeat(`{"a":`, maxValidDepth+1)+"1"+strings.Repeat("}", maxValidDepth+1),
		strings.Repeat("[", 64)+strings.Repeat(`{"k":`, 64)+"0"+strings.Repeat("}", 64)+strings.Repeat("]", 64),
		strings.Repeat("[", 65)+strings.Repeat(`{"k":`, 63)+"0"+strings.Repeat("}", 63)+strings.Repeat("]", 65),
		strings.Repeat("[", 64)+strings.Repeat(`{"k":`, 64)+"0"+strings.Repeat("]", 64)+strings.Repeat("}", 64),
	)
}

// TestValidJSONMatchesStdlib: the fast validator accepts exactly what
// json.Valid accepts.
func TestValidJSONMatchesStdlib(t *testing.T) {
	for _, s := range validJSONCases() {
		if got, want := validJSON([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("validJSON(%.60q) = %v, json.Valid = %v", s, got, want)
		}
	}
}

// FuzzValidJSON: differential against json.Valid on any input.
func FuzzValidJSON(f *testing.F) {
	for _, s := range validJSONCases() {
		if len(s) < 1000 {
			f.Add([]byte(s))
		}
	}
	f.Add([]byte(`{"secret":42,"hints":["higher","lower"],"note":"ü\u0000"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := validJSON(data), json.Valid(data); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid = %v", data, got, want)
		}
	})
}
