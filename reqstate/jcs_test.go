package reqstate

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// Examples from RFC 8785 and its reference test data.
func TestCanonicalizeRFC8785(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{
			"rfc 3.2.2 sample",
			`{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`,
			`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
		},
		{
			"rfc 3.2.3 sorting",
			`{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001f600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}",
		},
		{"rfc arrays", `[56,{"d":true,"10":null,"1":[]}]`, `[56,{"1":[],"10":null,"d":true}]`},
		{"rfc french", `{"peach":"This sorting order","péché":"is wrong according to French","pêche":"but canonicalization MUST","sin":"ignore locale"}`,
			`{"peach":"This sorting order","péché":"is wrong according to French","pêche":"but canonicalization MUST","sin":"ignore locale"}`},
		{"rfc structures", `{"1":{"f":{"f":"hi","F":5},"\n":56.0},"10":{},"":"empty","a":{},"111":[{"e":"yes","E":"no"}],"A":{}}`,
			`{"":"empty","1":{"\n":56,"f":{"F":5,"f":"hi"}},"10":{},"111":[{"E":"no","e":"yes"}],"A":{},"a":{}}`},
		{"rfc unicode", `{"Unnormalized Unicode":"A\u030a"}`, "{\"Unnormalized Unicode\":\"A\u030a\"}"},
		{"rfc values", `{"numbers":[1E30,4.50,6,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`,
			`{"literals":[null,true,false],"numbers":[1e+30,4.5,6,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
		{"whitespace", " \t\r\n{ \"a\" : [ 1 , 2 ] } \n", `{"a":[1,2]}`},
		{"escapes kept minimal", `"\u0000\u001f\b\f\t\/\u007f\u2028"`, "\"\\u0000\\u001f\\b\\f\\t/\u007f\u2028\""},
		{"scalar", `true`, `true`},
		{"empty", `{}`, `{}`},
	} {
		got, err := Canonicalize([]byte(tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// ES6 Number.prototype.toString vectors, from RFC 8785 Appendix B and the
// ECMAScript specification.
func TestES6Numbers(t *testing.T) {
	for _, tc := range []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"}, // -0
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	} {
		f := math.Float64frombits(tc.bits)
		if got := string(AppendES6Number(nil, f)); got != tc.want {
			t.Errorf("%#016x (%v): got %s, want %s", tc.bits, f, got, tc.want)
		}
	}
	for in, want := range map[string]string{
		"1e21": "1e+21", "1e20": "100000000000000000000", "1e-7": "1e-7", "1e-6": "0.000001",
		"0.1": "0.1", "-0": "0", "-0.0": "0", "2.5E+3": "2500", "9007199254740993": "9007199254740992",
		"123456789012345678901234": "1.2345678901234569e+23", "1E400": "", "-1e400": "", "1e-400": "0",
	} {
		got, err := Canonicalize([]byte(in))
		if want == "" {
			if !errors.Is(err, ErrJSON) {
				t.Errorf("%s: got %s, %v; want ErrJSON", in, got, err)
			}
			continue
		}
		if err != nil || string(got) != want {
			t.Errorf("%s: got %s, %v; want %s", in, got, err, want)
		}
	}
}

func TestCanonicalizeRejects(t *testing.T) {
	deep := strings.Repeat("[", MaxJSONDepth+1) + strings.Repeat("]", MaxJSONDepth+1)
	ok := strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth)
	if _, err := Canonicalize([]byte(ok)); err != nil {
		t.Fatalf("nesting of exactly MaxJSONDepth: %v", err)
	}
	for name, in := range map[string]string{
		"lone high surrogate":    `"\ud800"`,
		"lone low surrogate":     `"\udc00"`,
		"high then non-low":      `"\ud800\u0041"`,
		"high at end":            `"a\ud83d"`,
		"reversed pair":          `"\ude00\ud83d"`,
		"invalid utf-8":          "\"\xff\"",
		"overlong utf-8":         "\"\xc0\xaf\"",
		"utf-8 surrogate":        "\"\xed\xa0\x80\"",
		"raw control":            "\"a\nb\"",
		"duplicate name":         `{"a":1,"a":2}`,
		"duplicate after escape": `{"a":1,"\u0061":2}`,
		"too deep":               deep,
		"too deep object":        strings.Repeat(`{"a":`, MaxJSONDepth+1) + "1" + strings.Repeat("}", MaxJSONDepth+1),
		"deep bomb":              strings.Repeat("[", 1<<20),
		"trailing":               `{} {}`,
		"trailing comma":         `[1,]`,
		"leading zero":           `01`,
		"bare minus":             `-`,
		"dot no digits":          `1.`,
		"exp no digits":          `1e`,
		"plus sign":              `+1`,
		"NaN":                    `NaN`,
		"single quotes":          `'a'`,
		"unterminated":           `"abc`,
		"bad escape":             `"\x"`,
		"short unicode":          `"\u12"`,
		"empty":                  ``,
		"only space":             `  `,
		"truncated literal":      `tru`,
		"object missing colon":   `{"a" 1}`,
		"object non-string key":  `{1:2}`,
		"unterminated object":    `{"a":1`,
		"huge exponent":          `1e99999999999999999999`,
	} {
		if out, err := Canonicalize([]byte(in)); !errors.Is(err, ErrJSON) {
			t.Errorf("%s: got %q, %v; want ErrJSON", name, out, err)
		}
	}
}

func TestHashArguments(t *testing.T) {
	empty, err := HashArguments([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"", "null", "  null ", " { } "} {
		h, err := HashArguments([]byte(in))
		if err != nil || h != empty {
			t.Errorf("HashArguments(%q) = %v, %v; want the hash of {}", in, h, err)
		}
	}
	// Known answer: base64url(SHA-256("{}")).
	if got, want := empty.String(), "RBNvo1WzZ4oRRq0W9-hknpT7T8If536DEMBg9hyq_4o"; got != want {
		t.Errorf("hash of {} = %s, want %s", got, want)
	}
	a, _ := HashArguments([]byte(`{"b":2,"a":1.0}`))
	b, _ := HashArguments([]byte(`{"a":1,"b":2}`))
	c, _ := HashArguments([]byte(`{"a":1,"b":3}`))
	if a != b || a == c {
		t.Error("hash does not follow the canonical form")
	}
	if _, err := HashArguments([]byte(`{"a":"\ud800"}`)); !errors.Is(err, ErrJSON) {
		t.Errorf("lone surrogate: %v", err)
	}
}

// The arguments hash runs twice in every paused flow (when it pauses and
// when it resumes), on the request's hot path.
func BenchmarkHashArguments(b *testing.B) {
	args := []byte(`{"service":"api","env":"production","replicas":3,"regions":["eu-west-1","us-east-1"],"note":"caf\u00e9"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := HashArguments(args); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCanonicalizeAllocations pins the allocation-lean design: the output
// buffer, one scratch buffer per object whatever its member count, and
// nothing per member. (The first implementation took 12, 37, 23 and 2.)
func TestCanonicalizeAllocations(t *testing.T) {
	for _, c := range []struct {
		in  string
		max float64
	}{
		{`{"service":"api","env":"production"}`, 2},
		{`{"a":1,"b":"x","c":true,"d":null,"e":"y","f":2,"g":"z","h":false,"i":"w"}`, 3}, // more members than fit on the stack
		{`{"a":{"b":{"c":"d"}},"e":["f","g"]}`, 4},
		{`"no escapes"`, 1},
	} {
		in := []byte(c.in)
		got := testing.AllocsPerRun(100, func() {
			if _, err := Canonicalize(in); err != nil {
				t.Fatal(err)
			}
		})
		if got > c.max {
			t.Errorf("Canonicalize(%s): %v allocations, want at most %v", c.in, got, c.max)
		}
	}
}
