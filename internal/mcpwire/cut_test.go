package mcpwire

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestCutMember(t *testing.T) {
	for _, c := range []struct{ in, key, value, want string }{
		{`{"content":null,"a":1}`, "content", "null", `{"a":1}`},
		{`{"_meta":{"content":null,"k":"v"},"content":null,"a":[1,{"b":"}"}]}`, "content", "null", `{"_meta":{"content":null,"k":"v"},"a":[1,{"b":"}"}]}`},
		{`{"a":1,"content":null}`, "content", "null", `{"a":1}`},
		{`{"a":"x,\"content\":null","content":null}`, "content", "null", `{"a":"x,\"content\":null"}`},
		{`{"content":null}`, "content", "null", `{}`},
		{`{ "a" : 1 , "content" : null , "b" : 2 }`, "content", "null", `{ "a" : 1 , "b" : 2 }`},
		{`{ "a" : 1 , "content" : null }`, "content", "null", `{ "a" : 1}`},
		{`{ "content" : null }`, "content", "null", `{}`},
		{`{"\u0063ontent":null,"a":1}`, "content", "null", `{"a":1}`},
		{`{"content":[],"a":1}`, "content", "null", ``},
		{`{"a":{"content":null}}`, "content", "null", ``},
		{`{}`, "content", "null", ``},
		{`[]`, "content", "null", ``},
		{``, "content", "null", ``},
	} {
		in := []byte(c.in)
		got, ok := CutMember(in, c.key, c.value)
		if c.want == "" {
			if ok || string(got) != c.in {
				t.Errorf("%s: cut to %s (%v), want it unchanged", c.in, got, ok)
			}
			continue
		}
		if !ok || string(got) != c.want {
			t.Errorf("%s: got %s (%v), want %s", c.in, got, ok, c.want)
		}
	}
	in := []byte(`{"_meta":{"k":"v"},"content":null,"a":"x"}`)
	buf := make([]byte, len(in))
	if n := testing.AllocsPerRun(20, func() { copy(buf, in); _, _ = CutMember(buf, "content", "null") }); n > 0 && !raceEnabled {
		t.Errorf("CutMember allocates %v times", n)
	}
}

// What CutMember leaves is the object without the member, as a decoder
// reads it, every other member as it was.
func FuzzCutMember(f *testing.F) {
	for _, s := range []string{`{"content":null,"a":1}`, `{"a":{"b":[1,"]"]},"content":null}`, `{"content":null}`, `{ "x" : "y" , "content" : null }`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || b[0] != '{' || b[len(b)-1] != '}' || !json.Valid(b) {
			return
		}
		o, dup, ok := scanObject(b)
		if !ok || dup {
			return // CutMember is for unique names
		}
		want := map[string]json.RawMessage(o)
		in := append([]byte(nil), b...)
		got, cut := CutMember(in, "content", "null")
		v, had := want["content"]
		if cut != (had && string(v) == "null") {
			t.Fatalf("%s: cut %v, member %q", b, cut, v)
		}
		if !cut {
			if string(got) != string(b) {
				t.Fatalf("%s: changed to %s without a cut", b, got)
			}
			return
		}
		delete(want, "content")
		var m map[string]json.RawMessage
		if err := json.Unmarshal(got, &m); err != nil {
			t.Fatalf("%s: cut to invalid %s: %v", b, got, err)
		}
		for k := range m {
			m[k] = TrimSpace(m[k])
		}
		for k := range want {
			want[k] = TrimSpace(want[k])
		}
		if !reflect.DeepEqual(m, want) {
			t.Fatalf("%s: cut to %s", b, got)
		}
	})
}
