package mcpwire

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestAppendEdited(t *testing.T) {
	edits := []Edit{{Name: "state"}, {Name: "answers", Value: json.RawMessage(`{"k":1}`)}}
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{`{"a" : 1, "state":"x","answers":null,"b":[ 2 ]}`, `{"a" : 1,"answers":{"k":1},"b":[ 2 ]}`, true},
		{`{"answers" : {}}`, `{"answers" : {"k":1}}`, true},
		{`{"st\u0061te":1,"z":"\u003c"}`, `{"z":"\u003c","answers":{"k":1}}`, true},
		{`{}`, `{"answers":{"k":1}}`, true},
		{`{"state":1}`, `{"answers":{"k":1}}`, true},
		{`{"state":1,"state":2}`, ``, false},
		{`{"answers":1,"\u0061nswers":2}`, ``, false},
		{`{"a":1,"a":2}`, `{"a":1,"a":2,"answers":{"k":1}}`, true}, // other repeats are the caller's
		{`[1]`, ``, false},
	} {
		got, ok := AppendEdited([]byte("x"), []byte(tc.in), edits...)
		if ok != tc.ok || (ok && string(got) != "x"+tc.want) || (!ok && string(got) != "x") {
			t.Errorf("AppendEdited(%s) = %s, %v; want x%s, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestAppendEditedAllocs: splicing into a buffer large enough allocates
// nothing, so the proxy's rebuilt request costs one allocation.
func TestAppendEditedAllocs(t *testing.T) {
	in := []byte(`{"name":"x","requestState":"t","inputResponses":{"a":1},"_meta":{}}`)
	state := json.RawMessage(`"s"`)
	dst := make([]byte, 0, 256)
	n := testing.AllocsPerRun(100, func() {
		_, _ = AppendEdited(dst[:0], in, Edit{Name: "requestState", Value: state}, Edit{Name: "inputResponses"})
	})
	if n != 0 {
		t.Fatalf("%v allocations per splice", n)
	}
}

// FuzzAppendEdited: for an object whose names do not repeat, the edited
// object is valid JSON holding exactly the original members, the dropped
// one gone and the set one set; a repeated edited name is refused.
func FuzzAppendEdited(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":2,"c":3}`, `{"\u0061":1}`, `{"b":{"a":1}}`, `{"a":1,"a":2}`, `{ }`, `{"c":"\"a\""}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := ParseObject(b)
		if err != nil {
			return
		}
		b = TrimSpace(b)
		var names []string
		for k := range Members(b) {
			names = append(names, k)
		}
		count := map[string]int{}
		for _, k := range names {
			count[k]++
		}
		out, ok := AppendEdited(nil, b, Edit{Name: "a"}, Edit{Name: "b", Value: json.RawMessage(`[true]`)})
		if count["a"] > 1 || count["b"] > 1 {
			if ok {
				t.Fatalf("a repeated edited name was spliced: %s -> %s", b, out)
			}
			return
		}
		if !ok {
			t.Fatalf("refused %s", b)
		}
		got, err := ParseObject(out)
		if err != nil {
			t.Fatalf("%s -> invalid %s: %v", b, out, err)
		}
		delete(o, "a")
		o["b"] = json.RawMessage(`[true]`)
		if len(got) != len(o) {
			t.Fatalf("%s -> %s: %d members, want %d", b, out, len(got), len(o))
		}
		for k, v := range o {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("%s -> %s: member %q is %s, want %s", b, out, k, got[k], v)
			}
		}
	})
}
