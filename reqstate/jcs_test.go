package reqstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf16"
)

// Examples from RFC 8785 and its reference test data.
func TestCanonicalizeRFC8785(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{
			// With 333333333.3333333 for the RFC's 333333333.33333329: that
			// text is another decimal than its canonical form, so
			// Canonicalize refuses it (TestInexactNumbers).
			"rfc 3.2.2 sample",
			`{
  "numbers": [333333333.3333333, 1E30, 4.50,
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
		"0.1": "0.1", "-0": "0", "-0.0": "0", "2.5E+3": "2500", "9007199254740992": "9007199254740992",
		"1.2345678901234569e23": "1.2345678901234569e+23", "1E400": "", "-1e400": "", "0e-400": "0",
		"0.00000000000000000000": "0", "-0E+99999999999999999999": "0", "1.0": "1", "10E-1": "1",
		"0.0001000": "0.0001", "1234567890123456800": "1234567890123456800", "1152921504606847000.0": "1152921504606847000",
		"-9007199254740991": "-9007199254740991", "5e-324": "5e-324", "1.7976931348623157e308": "1.7976931348623157e+308",
	} {
		got, err := Canonicalize([]byte(in))
		if want == "" {
			if !errors.Is(err, ErrJSON) || errors.Is(err, ErrInexactNumber) {
				t.Errorf("%s: got %s, %v; want ErrJSON (out of range)", in, got, err)
			}
			continue
		}
		if err != nil || string(got) != want {
			t.Errorf("%s: got %s, %v; want %s", in, got, err, want)
		}
	}
}

// TestInexactNumbers pins item 6 of issue 9: numbers whose canonical form
// would be another number are refused, with ErrInexactNumber (and
// ErrJSON), so that two different values never share an arguments hash.
func TestInexactNumbers(t *testing.T) {
	// The two ids of the issue: one double, two int64 values.
	a, errA := HashArguments([]byte(`{"id":1234567890123456789}`))
	b, errB := HashArguments([]byte(`{"id":1234567890123456800}`))
	if errA == nil && errB == nil {
		t.Fatalf("both ids hash (equal: %v)", a == b)
	}
	if !errors.Is(errA, ErrInexactNumber) || !errors.Is(errA, ErrJSON) {
		t.Fatalf("1234567890123456789: %v, want ErrInexactNumber and ErrJSON", errA)
	}
	if errB != nil || a == b {
		t.Fatalf("1234567890123456800 (the shortest decimal of its double) must hash: %v", errB)
	}
	if msg := errA.Error(); strings.Contains(msg, "1234567890123456789") || !strings.Contains(msg, "offset 6") {
		t.Errorf("error %q must give the offset, never the value", msg)
	}
	for _, in := range []string{
		"9007199254740993",                     // 2^53+1: the double is 2^53
		"-9007199254740993",                    //
		"1152921504606846976",                  // 2^60 exactly, but its canonical form is 1152921504606847000
		"18446744073709551615",                 // max uint64
		"123456789012345678901234",             // 1.2345678901234569e+23 is another number
		"0.10000000000000001",                  // becomes 0.1
		"0.1000000000000000055511151231257827", // the exact binary value of 0.1: becomes 0.1
		"1e-400",                               // underflows to 0
		"-1e-400",                              //
		"4.9406564584124654e-325",              // rounds to 5e-324, is not it
		"1.00000000000000000001",               // more digits than any double's shortest decimal
		"333333333.33333329",                   // RFC 8785's own sample rounds this to 333333333.3333333
		`[1,{"a":[0.30000000000000001]}]`,      // nested
	} {
		if out, err := Canonicalize([]byte(in)); !errors.Is(err, ErrInexactNumber) || !errors.Is(err, ErrJSON) {
			t.Errorf("%s: got %s, %v; want ErrInexactNumber", in, out, err)
		}
	}
	// Many spellings of one value: one hash, no error.
	want, _ := HashArguments([]byte(`{"n":[1,0.5,100,1e+21,0.3]}`))
	for _, in := range []string{
		`{"n":[1.0,5e-1,1e2,1e21,0.3]}`,
		`{"n":[10E-1,0.50,100.000,1000000000000000000000,3e-1]}`,
		`{"n":[0.01e2,500e-3,0.0001e6,1.000e21,30000000000000000000e-20]}`,
	} {
		if h, err := HashArguments([]byte(in)); err != nil || h != want {
			t.Errorf("%s: %v, %v; want the hash of its shortest spelling", in, h, err)
		}
	}
	// Every integer up to 2^53 in magnitude is exact (I-JSON's safe range).
	for _, v := range []int64{1<<53 - 1, 1 << 53, -(1 << 53), 1<<53 - 2, 999999999999999, 1000000000000000, 4503599627370497} {
		if _, err := Canonicalize(strconv.AppendInt(nil, v, 10)); err != nil {
			t.Errorf("%d: %v", v, err)
		}
	}
}

// TestExactDecimalRandom checks exactDecimal against big.Rat on random
// decimals near doubles: a number is accepted exactly when the value of
// its canonical form (which is the value of the double's shortest decimal)
// equals its own.
func TestExactDecimalRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 9))
	for range 20000 {
		f := math.Float64frombits(rng.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		var lit string
		switch rng.IntN(4) {
		case 0: // the shortest decimal, respelt: always exact
			lit = strconv.FormatFloat(f, 'e', -1, 64)
		case 1: // more digits than the shortest: exact only if the extra ones are zeros
			lit = strconv.FormatFloat(f, 'e', 16+rng.IntN(8), 64)
		case 2: // an integer near 2^53..2^64
			lit = strconv.FormatUint(rng.Uint64()>>rng.IntN(12), 10)
		default: // fewer digits: a different double, usually exact for it
			lit = strconv.FormatFloat(f, 'g', 1+rng.IntN(17), 64)
		}
		out, err := Canonicalize([]byte(lit))
		var in, canon big.Rat
		if _, ok := in.SetString(lit); !ok {
			t.Fatalf("big.Rat cannot read %s", lit)
		}
		if err != nil {
			if !errors.Is(err, ErrInexactNumber) {
				t.Fatalf("%s: %v", lit, err)
			}
			// Refused: its double's shortest decimal is another value.
			g, _ := strconv.ParseFloat(lit, 64)
			canon.SetString(strconv.FormatFloat(g, 'e', -1, 64))
			if in.Cmp(&canon) == 0 {
				t.Fatalf("%s refused, but its canonical form has its value", lit)
			}
			continue
		}
		if _, ok := canon.SetString(string(out)); !ok || in.Cmp(&canon) != 0 {
			t.Fatalf("%s accepted, but canonical form %s is another value", lit, out)
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
	if _, err := HashArguments([]byte(`{"a":"\ud800"}`)); !errors.Is(err, ErrJSON) || errors.Is(err, ErrInexactNumber) {
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
// buffer, one scratch buffer for the whole document, and nothing per
// member or per object while an object's members fit on the stack. (The
// first implementation took 12, 37, 23 and 2 on the first, third, fourth
// and sixth.)
func TestCanonicalizeAllocations(t *testing.T) {
	for _, c := range []struct {
		in  string
		max float64
	}{
		{`{"service":"api","env":"production"}`, 2}, // the output, and the scratch buffer to reorder
		{`{"env":"production","service":"api"}`, 1}, // in order already: nothing to reorder
		{`{"a":1,"b":"x","c":true,"d":null,"e":"y","f":2,"g":"z","h":false,"i":"w"}`, 1},
		{`{"a":{"b":{"c":"d"}},"e":["f","g"]}`, 1},
		{`{"b":{"d":{"c":"d"},"c":1},"a":["f","g"]}`, 2}, // one scratch buffer for every object
		{`"no escapes"`, 1},
		{`{"z":"caf\u00e9","a":1}`, 2}, // one scratch buffer for strings and objects
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

// TestCompareJCSNames checks the comparison of member names in canonical
// form against sorting their UTF-16 encodings, on names that mix ASCII,
// characters RFC 8785 escapes, U+E000-U+FFFF and characters above U+FFFF,
// where UTF-16 order and code point order differ.
func TestCompareJCSNames(t *testing.T) {
	alphabet := []rune{'a', 'b', '"', '\\', '\n', 0x1f, 0x7f, 0xE9, 0x7FF, 0xD7FF, 0xE000, 0xFB33, 0xFFFF, 0x10000, 0x1F600, 0x10FFFF}
	rng := rand.New(rand.NewPCG(3, 4))
	name := func() string {
		r := make([]rune, rng.IntN(4))
		for i := range r {
			r[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(r)
	}
	canonical := func(s string) []byte { // as compareJCSNames reads it: from after the opening quote
		return appendJCSString(nil, s)[1:]
	}
	for range 20000 {
		a, b := name(), name()
		want := slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		if got := compareJCSNames(canonical(a), canonical(b)); got != want {
			t.Fatalf("compareJCSNames(%q, %q) = %d, want %d", a, b, got, want)
		}
	}
}

// linearDocuments returns documents of about size bytes that stress
// canonicalization: deep nesting whose members arrive out of order at
// every level (so that every level is reordered), wide objects, and both.
func linearDocuments(size int) map[string][]byte {
	docs := map[string][]byte{}
	// Issue 9, item 12: a long string under 63 levels, each {"b":...,"a":0}.
	const depth = MaxJSONDepth - 1
	open, closing := strings.Repeat(`{"b":`, depth), strings.Repeat(`,"a":0}`, depth)
	docs["deep"] = []byte(open + `"` + strings.Repeat("x", size-len(open)-len(closing)-2) + `"` + closing)
	// The same, with arrays of escaped strings and numbers at the bottom.
	var leaf strings.Builder
	for leaf.Len() < size-len(open)-len(closing)-2 {
		leaf.WriteString(`["\u00e9\n",1E2,{"y":0.5,"x":null}],`)
	}
	open, closing = open[len(`{"b":`)*2:], closing[len(`,"a":0}`)*2:] // two levels fewer: the leaf adds them
	docs["deep mixed"] = []byte(open + "[" + strings.TrimSuffix(leaf.String(), ",") + "]" + closing)
	// One wide object with short names in reverse order.
	var wide strings.Builder
	wide.WriteString("{")
	for i := 0; wide.Len() < size-16; i++ {
		if i > 0 {
			wide.WriteString(",")
		}
		fmt.Fprintf(&wide, `"%x":0`, 1<<24-i)
	}
	docs["wide"] = []byte(wide.String() + "}")
	// 63 levels, each a wide object whose last member holds the next.
	var nest strings.Builder
	per := size / depth / 12
	for range depth {
		nest.WriteString("{")
		for j := range per {
			fmt.Fprintf(&nest, `"%04x":%d,`, 0xffff-j, j)
		}
		nest.WriteString(`"0":`)
	}
	nest.WriteString("0" + strings.Repeat("}", depth))
	docs["deep wide"] = []byte(nest.String())
	// One long string of escapes, decoded through the scratch buffer.
	docs["escaped"] = []byte(`"` + strings.Repeat(`\u00e9\n`, (size-2)/8) + `"`)
	// A flat array of strings: no object to reorder.
	docs["flat"] = []byte("[" + strings.TrimSuffix(strings.Repeat(`"abcdefgh",`, size/11), ",") + "]")
	return docs
}

// TestCanonicalizeLinearMemory pins item 12 of issue 9: canonicalizing
// allocates at most a small multiple of the input, however deep. Before
// the fix, each object level copied its members into its parent: 1 MiB at
// depth 63 allocated 64 MiB. Now every value is written once, in place.
func TestCanonicalizeLinearMemory(t *testing.T) {
	const size = 1 << 20
	const maxRatio = 8 // bytes allocated per input byte; these shapes take 1 to 5 (6 under -race)
	for name, in := range linearDocuments(size) {
		if _, err := Canonicalize(in); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// The least of three runs, in case anything else allocated meanwhile.
		least := uint64(math.MaxUint64)
		for range 3 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, _ = Canonicalize(in)
			runtime.ReadMemStats(&after)
			least = min(least, after.TotalAlloc-before.TotalAlloc)
		}
		ratio := float64(least) / float64(len(in))
		t.Logf("%-10s %7d bytes in, %8d allocated: %.2f per input byte", name, len(in), least, ratio)
		if ratio > maxRatio {
			t.Errorf("%s: %d bytes allocated for %d of input (%.1fx), want at most %dx", name, least, len(in), ratio, maxRatio)
		}
	}
}

// BenchmarkCanonicalizeShapes: throughput on the documents of
// TestCanonicalizeLinearMemory, for comparing deep and flat.
func BenchmarkCanonicalizeShapes(b *testing.B) {
	docs := linearDocuments(1 << 20)
	for _, name := range slices.Sorted(maps.Keys(docs)) {
		in := docs[name]
		b.Run(strings.ReplaceAll(name, " ", "-"), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Canonicalize(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHashArgumentsShapes: HashArguments, with its checks beyond
// RFC 8785 (member names unique under case folding), on the documents of
// TestCanonicalizeLinearMemory: the wide ones are where a check per object
// costs most.
func BenchmarkHashArgumentsShapes(b *testing.B) {
	docs := linearDocuments(1 << 20)
	for _, name := range slices.Sorted(maps.Keys(docs)) {
		in := docs[name]
		b.Run(strings.ReplaceAll(name, " ", "-"), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := HashArguments(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestFoldedNames pins issue 18, item 3: HashArguments refuses, at any
// depth, an object with two member names equal under case folding as
// encoding/json folds them (strings.EqualFold), with ErrFoldedNames; and
// Canonicalize, RFC 8785 alone, still accepts them.
func TestFoldedNames(t *testing.T) {
	for _, in := range []string{
		`{"ID":2,"id":1}`,
		`{"id":1,"ID":2}`,
		`{"id":1,"Id":2}`,
		`{"a":{"recordId":1,"recordID":2}}`,
		`[1,{"ok":true},{"x":{"y":[{"Name":"a","nAME":"b"}]}}]`,
		`{"s":1,"ſ":2}`,       // U+017F LATIN SMALL LETTER LONG S
		`{"S":1,"\u017f":2}`,  // the same, escaped
		`{"ſ":1,"z":0,"s":2}`, // not neighbours in RFC 8785 order
		`{"k":1,"K":2}`,       // U+212A KELVIN SIGN
		`{"K":1,"\u212a":2}`,  // the same, escaped
		`{"deleteK":1,"DELETEk":2}`,
		`{"é":1,"É":2}`,
		`{"σ":1,"Σ":2}`, // Σ's orbit is {Σ, ς, σ}
		`{"ς":1,"σ":2}`,
		`{"\ud801\udc00":1,"\ud801\udc28":2}`, // DESERET CAPITAL and SMALL LONG I, above U+FFFF
		`{"b":1,"a":{"c":2,"C":3},"A":4}`,
	} {
		if _, err := Canonicalize([]byte(in)); err != nil {
			t.Errorf("Canonicalize(%s): %v, want accepted (RFC 8785 alone)", in, err)
		}
		_, err := HashArguments([]byte(in))
		if !errors.Is(err, ErrFoldedNames) || !errors.Is(err, ErrJSON) {
			t.Errorf("HashArguments(%s): %v, want ErrFoldedNames", in, err)
			continue
		}
		if strings.Contains(err.Error(), `"`) {
			t.Errorf("error quotes the input: %v", err)
		}
	}
	for _, in := range []string{
		`{"a":1,"b":2}`,
		`{"id":1,"idx":2,"i_d":3,"i":4,"d":5}`,
		`{"recordId":1,"record_id":2,"recordIds":3}`,
		`{"ß":1,"ss":2,"x":{"ẞ":3}}`, // ß folds to ẞ, not to ss: EqualFold is one character for one
		`{"ı":1,"i":2,"İ":3}`,        // dotless and dotted I fold to themselves
		`{"k":1,"kk":2}`,
		`[{"ID":1},{"id":2}]`, // one per object
		`{"a":{"ID":1},"A_":{"id":2}}`,
	} {
		if _, err := HashArguments([]byte(in)); err != nil {
			t.Errorf("HashArguments(%s): %v, want accepted", in, err)
		}
	}
	// Exact duplicates are still refused, as not RFC 8785, by both.
	for _, in := range []string{`{"id":1,"id":2}`, `{"a":[{"x":1,"\u0078":2}]}`} {
		if _, err := Canonicalize([]byte(in)); !errors.Is(err, ErrJSON) {
			t.Errorf("Canonicalize(%s): %v, want ErrJSON", in, err)
		}
		if _, err := HashArguments([]byte(in)); !errors.Is(err, ErrJSON) || errors.Is(err, ErrFoldedNames) {
			t.Errorf("HashArguments(%s): %v, want ErrJSON for a duplicate", in, err)
		}
	}
}

// TestFoldedNamesBindTogether shows why TestFoldedNames refuses what it
// does: two texts with the same members in another order have one RFC
// 8785 form, yet encoding/json decodes both names of each pair into one
// struct field, the last member winning, so the value bound differs.
func TestFoldedNamesBindTogether(t *testing.T) {
	type bound struct {
		ID    int `json:"id"`
		S     int `json:"s"`
		K     int `json:"k"`
		Sigma int `json:"σ"`
	}
	for _, c := range []struct {
		a, b  string
		field func(bound) int
	}{
		{"ID", "id", func(v bound) int { return v.ID }},
		{"S", "ſ", func(v bound) int { return v.S }},
		{"\u212a", "k", func(v bound) int { return v.K }},
		{"Σ", "ς", func(v bound) int { return v.Sigma }},
	} {
		one := fmt.Sprintf(`{"%s":2,"%s":1}`, c.a, c.b)
		two := fmt.Sprintf(`{"%s":1,"%s":2}`, c.b, c.a)
		c1, err1 := Canonicalize([]byte(one))
		c2, err2 := Canonicalize([]byte(two))
		if err1 != nil || err2 != nil || string(c1) != string(c2) {
			t.Fatalf("%s and %s: canonical forms %s, %s (%v, %v), want one", one, two, c1, c2, err1, err2)
		}
		var v1, v2 bound
		if err := json.Unmarshal([]byte(one), &v1); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(two), &v2); err != nil {
			t.Fatal(err)
		}
		if c.field(v1) != 1 || c.field(v2) != 2 {
			t.Errorf("%s binds %d, %s binds %d: want 1 and 2", one, c.field(v1), two, c.field(v2))
		}
		for _, in := range []string{one, two} {
			if _, err := HashArguments([]byte(in)); !errors.Is(err, ErrFoldedNames) {
				t.Errorf("HashArguments(%s): %v, want ErrFoldedNames", in, err)
			}
		}
	}
}

// TestFoldKey checks foldKey against the orbits of unicode.SimpleFold for
// every character, and so against strings.EqualFold, which compares
// character by character with those orbits: the key of a character is a
// member of its orbit (so distinct orbits have distinct keys), the same
// for every member, and equal to it under strings.EqualFold.
func TestFoldKey(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if utf16.IsSurrogate(r) {
			continue
		}
		k := foldKey(r)
		inOrbit := false
		for m := unicode.SimpleFold(r); ; m = unicode.SimpleFold(m) {
			if foldKey(m) != k {
				t.Fatalf("foldKey(%U) = %U but foldKey(%U) = %U: one orbit, two keys", r, k, m, foldKey(m))
			}
			inOrbit = inOrbit || m == k
			if m == r {
				break
			}
		}
		if !inOrbit || !strings.EqualFold(string(r), string(k)) {
			t.Fatalf("foldKey(%U) = %U, not in its orbit", r, k)
		}
	}
	if foldKey(-1) != -1 {
		t.Fatal("foldKey(-1) is not -1")
	}
}

// TestCompareFoldedNames checks compareFoldedNames against
// strings.EqualFold on random names, and that it orders them (what
// slices.SortFunc needs): antisymmetric and transitive on these.
func TestCompareFoldedNames(t *testing.T) {
	alphabet := []rune{'a', 'A', 'k', 'K', 0x212A, 's', 'S', 0x17F, '_', '"', '\\', '\n', 0xE9, 0xC9, 0x3A3, 0x3C2, 0x3C3, 0x10400, 0x10428, 0xDF, 0x1E9E}
	rng := rand.New(rand.NewPCG(5, 6))
	name := func() string {
		r := make([]rune, rng.IntN(4))
		for i := range r {
			r[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(r)
	}
	canonical := func(s string) []byte { return appendJCSString(nil, s)[1:] }
	for range 20000 {
		a, b, c := name(), name(), name()
		ab := compareFoldedNames(canonical(a), canonical(b))
		if (ab == 0) != strings.EqualFold(a, b) {
			t.Fatalf("compareFoldedNames(%q, %q) = %d, strings.EqualFold = %v", a, b, ab, strings.EqualFold(a, b))
		}
		if ba := compareFoldedNames(canonical(b), canonical(a)); ba != -ab {
			t.Fatalf("compareFoldedNames(%q, %q) = %d but (%q, %q) = %d", a, b, ab, b, a, ba)
		}
		bc, ac := compareFoldedNames(canonical(b), canonical(c)), compareFoldedNames(canonical(a), canonical(c))
		if ab <= 0 && bc <= 0 && ac > 0 {
			t.Fatalf("not transitive: %q <= %q <= %q but %q > %q", a, b, c, a, c)
		}
	}
}

// TestFoldedNamesWide: on a wide object of names that are not in folded
// order (so that the check sorts), a collision between the first member
// and the last is found, and distinct names mixing cases pass.
func TestFoldedNamesWide(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"ID":0`)
	for i := range 10000 {
		fmt.Fprintf(&b, `,"Name%xX":%d`, i, i)
	}
	if _, err := HashArguments([]byte(b.String() + "}")); err != nil {
		t.Fatalf("distinct names: %v", err)
	}
	if _, err := HashArguments([]byte(b.String() + `,"id":1}`)); !errors.Is(err, ErrFoldedNames) {
		t.Fatalf("ID and id among 10 000 members: %v, want ErrFoldedNames", err)
	}
}

// TestHashArgumentsAllocations: the fold check allocates nothing: the
// hash of a small object takes what canonicalizing it does.
func TestHashArgumentsAllocations(t *testing.T) {
	for _, c := range []struct {
		in  string
		max float64
	}{
		{`{"env":"production","service":"api"}`, 1},
		{`{"service":"api","env":"production","recordId":1,"record_id":2,"Zone":"eu"}`, 2},
		{`{"b":{"d":{"C":"d","c_":1},"c":1},"a":[{"G":"f"},{"g":"g"}]}`, 2},
	} {
		in := []byte(c.in)
		got := testing.AllocsPerRun(100, func() {
			if _, err := HashArguments(in); err != nil {
				t.Fatal(err)
			}
		})
		if got > c.max {
			t.Errorf("HashArguments(%s): %v allocations, want at most %v", c.in, got, c.max)
		}
	}
}
