package jcsoracle

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/mrtr-go/mrtr/reqstate"
)

// compare canonicalizes in with both implementations and fails on any
// disagreement that reqstate does not document (see the package doc). It
// reports whether both accepted in.
func compare(t testing.TB, in []byte) bool {
	t.Helper()
	ours, err := reqstate.Canonicalize(in)
	theirs, theirErr := jcs.Transform(in)
	switch {
	case err == nil && theirErr == nil:
		if !bytes.Equal(ours, theirs) {
			t.Fatalf("canonical forms differ for %q:\n reqstate %q\ngowebpki %q", in, ours, theirs)
		}
		return true
	case err == nil:
		t.Fatalf("reqstate accepts %q (-> %q), gowebpki/jcs rejects it: %v", in, ours, theirErr)
	case !errors.Is(err, reqstate.ErrJSON):
		t.Fatalf("reqstate error %v does not wrap ErrJSON", err)
	case theirErr == nil && !documented(err, in):
		t.Fatalf("reqstate rejects %q, gowebpki/jcs accepts it (-> %q): %v", in, theirs, err)
	}
	return false
}

// documented reports whether reqstate's refusal of in, which gowebpki/jcs
// accepts, is one of its documented differences.
func documented(err error, in []byte) bool {
	return errors.Is(err, reqstate.ErrInexactNumber) ||
		strings.Contains(err.Error(), "nesting too deep") && depth(in) > reqstate.MaxJSONDepth
}

// depth returns the deepest nesting of arrays and objects in the JSON text
// in (outside strings).
func depth(in []byte) int {
	d, deepest, inString := 0, 0, false
	for i := 0; i < len(in); i++ {
		switch c := in[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			d++
			deepest = max(deepest, d)
		case c == ']' || c == '}':
			d--
		}
	}
	return deepest
}

// seeds are hand-picked inputs: RFC 8785's samples, sorting traps
// (surrogate pairs against U+E000-U+FFFF), escapes, numbers at the edges
// of ECMAScript's notation switch, and malformed texts.
var seeds = []string{
	`{"numbers":[333333333.3333333,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`,
	`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
	`[56,{"d":true,"10":null,"1":[]}]`,
	`{"1":{"f":{"f":"hi","F":5},"\n":56.0},"10":{},"":"empty","a":{},"111":[{"e":"yes","E":"no"}],"A":{}}`,
	`{"\ufb33":1,"\ud800\udc00":2,"a\"b":3,"a":{"z":[],"y":{}}}`, `{"é":1,"e":2,"\u00e9\u0000":3}`,
	`{"b":{"d":[{"z":1,"y":2}],"c":"\u0000\u001f\u007f"},"a":[{"\ud83d\ude00":1,"\ufb33":2,"\uffff":3}]}`,
	`[1e21,1e20,1e-6,1e-7,-0,-0.0,0.1,5e-324,1.7976931348623157e308,9007199254740992,123456789012345680000]`,
	`[999999999999999900000,999999999999999700000,9.999999999999997e-7,1e23,1.0000000000000001e23]`,
	` { "a" : [ 1 , 2 ] } `, `"\ud83d\ude00"`, `true`, `null`, `0`, `"\/\b\f\n\r\t"`,
	`{"id":1234567890123456789}`, `0.10000000000000001`, `1e-400`, `1E400`,
	`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `"\ud800"`, `"\udc00\ud800"`, "\"\xff\"", "\"\xed\xa0\x80\"",
	`[1,]`, `{"a":1,}`, `01`, `-`, `1.`, `.5`, `+1`, `1e`, `"\x"`, `"\u12"`, `tru`, `nul`, `[`, `{`, `{"a"}`,
	`{} {}`, "\"a\nb\"", "\ufeff{}", "\u00a0{}", `NaN`, `Infinity`, `-Infinity`, `[1 2]`, "1 ", "[\"\x7f\"]",
	strings.Repeat("[", 64) + strings.Repeat("]", 64), strings.Repeat("[", 65) + strings.Repeat("]", 65),
}

// TestSeeds compares on the seeds and pins the documented differences:
// each must still be a difference (reqstate refuses what gowebpki/jcs
// accepts), so the package doc stays true.
func TestSeeds(t *testing.T) {
	for _, s := range seeds {
		compare(t, []byte(s))
	}
	for _, in := range []string{`{"id":1234567890123456789}`, `0.10000000000000001`, `1e-400`, strings.Repeat("[", 65) + strings.Repeat("]", 65)} {
		if _, err := jcs.Transform([]byte(in)); err != nil {
			t.Errorf("gowebpki/jcs rejects %.40q: %v; the documented difference is gone", in, err)
		}
		if _, err := reqstate.Canonicalize([]byte(in)); err == nil {
			t.Errorf("reqstate accepts %.40q", in)
		}
	}
}

// TestRFC8785TestData runs RFC 8785's own test data, as gowebpki/jcs
// ships it: every input reqstate accepts must give the expected output
// byte for byte. One input, values.json, holds 333333333.33333329, whose
// canonical form 333333333.3333333 is another number: reqstate refuses it
// (ErrInexactNumber), and is checked on it with that number respelt.
func TestRFC8785TestData(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/gowebpki/jcs").Output()
	if err != nil {
		t.Fatalf("locate github.com/gowebpki/jcs: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "testdata")
	inputs, _ := filepath.Glob(filepath.Join(dir, "input", "*.json"))
	if len(inputs) < 10 {
		t.Fatalf("found %d RFC 8785 test inputs in %s", len(inputs), dir)
	}
	for _, path := range inputs {
		in, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(dir, "output", filepath.Base(path)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := reqstate.Canonicalize(in)
		if filepath.Base(path) == "values.json" {
			if !errors.Is(err, reqstate.ErrInexactNumber) {
				t.Fatalf("values.json: %v, want ErrInexactNumber", err)
			}
			in = bytes.Replace(in, []byte("333333333.33333329"), []byte("333333333.3333333"), 1)
			got, err = reqstate.Canonicalize(in)
		}
		if err != nil || !bytes.Equal(got, bytes.TrimRight(want, "\n")) {
			t.Errorf("%s: got %q, %v\nwant %q", filepath.Base(path), got, err, want)
		}
		compare(t, in)
	}
}

// TestRandomDocuments compares on random documents: nested arrays and
// objects with names and strings drawn to hit escapes, surrogate pairs and
// the UTF-16 sorting traps, and numbers of every kind.
func TestRandomDocuments(t *testing.T) {
	rng := rand.New(rand.NewPCG(8785, 1))
	n, both := 40000, 0
	if testing.Short() {
		n = 2000
	}
	for range n {
		var b []byte
		b = appendValue(b, rng, 0)
		if compare(t, b) {
			both++
		}
	}
	if both < n*3/4 {
		t.Fatalf("only %d of %d random documents accepted by both: the generator drifted", both, n)
	}
}

// TestRandomDoubles compares the number formatting on doubles drawn
// uniformly over all bit patterns, written the shortest way (both must
// accept and agree) and with 17 significant digits (both agree wherever
// reqstate accepts: the extra digits are then zeros).
func TestRandomDoubles(t *testing.T) {
	rng := rand.New(rand.NewPCG(8785, 2))
	n := 500000
	if testing.Short() {
		n = 20000
	}
	var buf []byte
	for range n {
		f := math.Float64frombits(rng.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		buf = strconv.AppendFloat(buf[:0], f, 'g', -1, 64)
		if !compare(t, buf) {
			t.Fatalf("shortest form %s refused", buf)
		}
		buf = strconv.AppendFloat(buf[:0], f, 'e', 16, 64)
		compare(t, buf)
	}
}

var alphabet = []string{"a", "b", "z", "A", "0", " ", "é", "€", "\ufb33", "\uffff", "😀", "\U0010ffff", `\"`, `\\`, `\/`,
	`\n`, `\t`, `\b`, `\f`, `\r`, `\u0000`, `\u001f`, `\u007f`, `\u00e9`, `\ud83d\ude00`, `\ud800\udc00`, `\uDBFF\uDFFF`, `\uE000`}

func appendString(b []byte, rng *rand.Rand) []byte {
	b = append(b, '"')
	for range rng.IntN(5) {
		b = append(b, alphabet[rng.IntN(len(alphabet))]...)
	}
	return append(b, '"')
}

func appendNumber(b []byte, rng *rand.Rand) []byte {
	switch k := rng.IntN(12); {
	case k < 2:
		return strconv.AppendInt(b, rng.Int64N(1<<53)-1<<52, 10)
	case k < 5:
		return strconv.AppendFloat(b, rng.NormFloat64()*math.Pow(10, float64(rng.IntN(40)-20)), 'g', -1, 64)
	case k < 8:
		return strconv.AppendFloat(b, rng.Float64(), 'f', rng.IntN(8), 64)
	case k < 10:
		return strconv.AppendFloat(b, float64(rng.IntN(1000)), 'E', rng.IntN(4), 64)
	case k < 11:
		return append(b, []string{"0", "-0", "1e21", "1e-7", "0.000001", "100", "1.50", "-0.0e5"}[rng.IntN(8)]...)
	default:
		return strconv.AppendUint(b, rng.Uint64(), 10) // mostly beyond 2^53: often refused by reqstate only
	}
}

func appendValue(b []byte, rng *rand.Rand, depth int) []byte {
	k := rng.IntN(10)
	if depth >= 6 {
		k = rng.IntN(5)
	}
	ws := func() {
		if rng.IntN(4) == 0 {
			b = append(b, " \n\t\r"[rng.IntN(4)])
		}
	}
	ws()
	switch k {
	case 0:
		b = append(b, []string{"true", "false", "null"}[rng.IntN(3)]...)
	case 1, 2:
		b = appendString(b, rng)
	case 3, 4:
		b = appendNumber(b, rng)
	case 5, 6:
		b = append(b, '[')
		for i := range rng.IntN(5) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, rng, depth+1)
		}
		b = append(b, ']')
	default:
		b = append(b, '{')
		seen := map[string]bool{}
		for i := range rng.IntN(6) {
			name := appendString(nil, rng)
			if seen[string(name)] { // the same spelling: a duplicate both refuse, rarely wanted
				continue
			}
			seen[string(name)] = true
			if i > 0 && len(seen) > 1 {
				b = append(b, ',')
			}
			ws()
			b = append(b, name...)
			ws()
			b = append(b, ':')
			b = appendValue(b, rng, depth+1)
		}
		b = append(b, '}')
	}
	ws()
	return b
}

// FuzzCanonicalizeJCS: on any input, reqstate and gowebpki/jcs agree on
// the output where both accept, reqstate accepts nothing gowebpki/jcs
// rejects, and reqstate rejects what gowebpki/jcs accepts only for a
// documented reason.
func FuzzCanonicalizeJCS(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	rng := rand.New(rand.NewPCG(8785, 3))
	for range 50 {
		f.Add(appendValue(nil, rng, 0))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		compare(t, in)
	})
}
