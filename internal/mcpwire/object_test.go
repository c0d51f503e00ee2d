package mcpwire

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// FuzzParseObject: the single-pass object splitter agrees with
// encoding/json on every input: the same verdict, the same members (by
// exact name, the last of repeated names winning), the same values.
func FuzzParseObject(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":"x\"y","c":{"d":[1,{"e":"}"}]},"a":2}`,
		`{ "k\u0065y" : "v" , "n":null,"t":true,"f":-1.5e3 }`,
		`{"":{}}`, `{"a":"\\"}`, `{}`, `{"a":[]}`, `{"a":1}x`, `{"a" 1}`,
		`{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":1e}`, `{"a":"\x"}`, `{"a":"\u12g4"}`, "{\"a\":\"\x01\"}",
		`{"a":[1,]}`, `{"a":{,}}`, `{"a":tru}`, `{"a":nul}`, `{,}`, `{"a":1,}`, "{\"\xff\":\"\xfe\"}",
		`{"a":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
		`{"a":` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParseObject(b)
		var want map[string]json.RawMessage
		wantErr := json.Unmarshal(b, &want)
		if wantErr == nil && want == nil {
			wantErr = ErrNotObject // null
		}
		if tb := TrimSpace(b); len(tb) > 0 && tb[0] == '{' && (err == nil) != json.Valid(tb) {
			t.Fatalf("ParseObject err %v, json.Valid %v, on %q", err, json.Valid(tb), b)
		}
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("parseObject err %v, encoding/json err %v, on %q", err, wantErr, b)
		}
		if err != nil {
			return
		}
		if len(got) != len(want) {
			t.Fatalf("%d members, encoding/json %d, on %q", len(got), len(want), b)
		}
		for k, v := range want {
			var a, c bytes.Buffer
			json.Compact(&a, v)
			json.Compact(&c, got[k])
			if !bytes.Equal(a.Bytes(), c.Bytes()) {
				t.Fatalf("member %q: %s, encoding/json %s, on %q", k, got[k], v, b)
			}
			if m, ok := member(bytes.TrimSpace(b), k); !ok || !bytes.Equal(m, got[k]) {
				t.Fatalf("member(%q) = %s, %v; split gives %s, on %q", k, m, ok, got[k], b)
			}
		}
	})
}

func TestParseUniqueObject(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want error
	}{
		{`{"a":1,"b":{"a":1,"a":2}}`, nil},
		{`{"a":1,"a":1}`, ErrDuplicateName},
		{`{"a":1,"\u0061":2}`, ErrDuplicateName},
		{`[]`, ErrNotObject},
		{`{"a":}`, ErrSyntax},
	} {
		if _, err := ParseUniqueObject([]byte(tc.in)); err != tc.want {
			t.Errorf("ParseUniqueObject(%s) = %v, want %v", tc.in, err, tc.want)
		}
	}
	o, _ := ParseUniqueObject([]byte(`{"p":{"x":1,"x":2},"q":{"x":1}}`))
	if _, ok := o.UniqueObject("p"); ok {
		t.Error("UniqueObject accepted repeated names")
	}
	if m, ok := o.UniqueObject("q"); !ok || string(m["x"]) != "1" {
		t.Errorf("UniqueObject(q) = %v, %v", m, ok)
	}
}

// TestMembers pins Members: every member in order, a repeated name each
// time, names decoded, values as written, nothing for a non-object.
func TestMembers(t *testing.T) {
	var got []string
	for k, v := range Members(json.RawMessage(`{ "a" : 1,"b":{"c":[2]},"\u0061":"x" , "d\"":null}`)) {
		got = append(got, k+"="+string(v))
	}
	want := []string{`a=1`, `b={"c":[2]}`, `a="x"`, `d"=null`}
	if !slices.Equal(got, want) {
		t.Fatalf("Members = %q, want %q", got, want)
	}
	for range Members(json.RawMessage(`[1]`)) {
		t.Fatal("Members yielded for an array")
	}
	n := 0
	for range Members(json.RawMessage(`{"a":1,"b":2}`)) {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("Members went on after break: %d", n)
	}
}

// TestMemberSpan pins MemberSpan: the value's bytes, absent members, and
// any repeated name (escaped or not) making the object not unique.
func TestMemberSpan(t *testing.T) {
	for _, tc := range []struct {
		obj, key, val string
		found, unique bool
	}{
		{`{"a":1, "b" : {"c":2} ,"d":"x"}`, "b", `{"c":2}`, true, true},
		{`{"a":1}`, "b", ``, false, true},
		{`{}`, "b", ``, false, true},
		{`{"b":1,"b":2}`, "b", ``, false, false},
		{`{"b":1,"a":0,"\u0062":2}`, "a", ``, false, false},
		{`[1]`, "b", ``, false, false},
	} {
		s, e, found, unique := MemberSpan([]byte(tc.obj), tc.key)
		if found != tc.found || unique != tc.unique || tc.obj[s:e] != tc.val {
			t.Errorf("MemberSpan(%s, %q) = %q, %v, %v; want %q, %v, %v", tc.obj, tc.key, tc.obj[s:e], found, unique, tc.val, tc.found, tc.unique)
		}
	}
}
