package mcpwire

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestParseCaps(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Caps
	}{
		{``, Caps{}},
		{`null`, Caps{}},
		{`[]`, Caps{}},
		{`{}`, Caps{}},
		{`{"elicitation":{}}`, Caps{ElicitForm: true}},
		{`{"elicitation":{"form":{}}}`, Caps{ElicitForm: true}},
		{`{"elicitation":{"url":{}}}`, Caps{ElicitURL: true}},
		{`{"elicitation":{"form":{},"url":{}}}`, Caps{ElicitForm: true, ElicitURL: true}},
		{`{"elicitation":true}`, Caps{}},
		{`{"sampling":{}}`, Caps{Sampling: true}},
		{`{"sampling":{"tools":{}}}`, Caps{Sampling: true, SamplingTools: true}},
		{`{"roots":{"listChanged":true}}`, Caps{Roots: true}},
		{`{"roots":{}}`, Caps{Roots: true}},
		{`{"roots":1}`, Caps{}},
	} {
		if got := ParseCaps(json.RawMessage(tc.in)); got != tc.want {
			t.Errorf("ParseCaps(%s) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// CapsFromValue, on the decoded form an SDK hands out, reads every
// declaration as ParseCaps reads its JSON.
func TestCapsFromValueMatchesParseCaps(t *testing.T) {
	for _, in := range []string{
		`{}`, `null`, `[]`, `{"elicitation":{}}`, `{"elicitation":{"form":{}}}`, `{"elicitation":{"url":{}}}`,
		`{"elicitation":{"form":{},"url":{}}}`, `{"elicitation":true}`, `{"elicitation":{"url":1}}`, `{"sampling":{}}`,
		`{"sampling":{"tools":{}}}`, `{"sampling":{"tools":null}}`, `{"roots":{"listChanged":true}}`, `{"roots":{}}`, `{"roots":1}`,
		`{"sampling":{},"elicitation":{},"roots":{"listChanged":true}}`,
	} {
		var v any
		if err := json.Unmarshal([]byte(in), &v); err != nil {
			t.Fatal(err)
		}
		if got, want := CapsFromValue(v), ParseCaps(json.RawMessage(in)); got != want {
			t.Errorf("%s: CapsFromValue %+v, ParseCaps %+v", in, got, want)
		}
	}
}

func TestCapsFromMeta(t *testing.T) {
	got := CapsFromMeta(json.RawMessage(`{"io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"x":1}`))
	if got != (Caps{Sampling: true}) {
		t.Errorf("got %+v", got)
	}
	for _, m := range []string{`{"io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"x":1}`, `{"x":1}`, `{}`, `[]`, ``} {
		if a, b := CapsFromParsedMeta(json.RawMessage(m)), CapsFromMeta(json.RawMessage(m)); a != b {
			t.Errorf("CapsFromParsedMeta(%s) = %+v, CapsFromMeta %+v", m, a, b)
		}
	}
	if got := CapsFromMeta(nil); got != (Caps{}) {
		t.Errorf("no meta declared %+v", got)
	}
}

func TestRequired(t *testing.T) {
	all := Caps{ElicitForm: true, ElicitURL: true, Sampling: true, SamplingTools: true, Roots: true}
	for _, tc := range []struct {
		caps   Caps
		method string
		params string
		want   string
	}{
		{Caps{}, MethodElicit, `{"message":"m","requestedSchema":{}}`, "elicitation.form"},
		{Caps{ElicitForm: true}, MethodElicit, `{"message":"m"}`, ""},
		{Caps{ElicitForm: true}, MethodElicit, `{"mode":"url","url":"https://x"}`, "elicitation.url"},
		{Caps{ElicitForm: true}, MethodElicit, `{"url":"https://x"}`, "elicitation.url"},
		{Caps{ElicitURL: true}, MethodElicit, `{"mode":"url","url":"https://x"}`, ""},
		{Caps{ElicitURL: true}, MethodElicit, `garbage`, "elicitation.form"},
		{Caps{}, MethodSampling, `{"maxTokens":1}`, "sampling"},
		{Caps{Sampling: true}, MethodSampling, `{"maxTokens":1}`, ""},
		{Caps{Sampling: true}, MethodSampling, `{"tools":[{"name":"t"}]}`, "sampling.tools"},
		{Caps{Sampling: true, SamplingTools: true}, MethodSampling, `{"tools":[{"name":"t"}]}`, ""},
		{Caps{}, MethodListRoots, ``, "roots"},
		{Caps{Roots: true}, MethodListRoots, ``, ""},
		{all, "tasks/get", `{}`, Unvettable},
		{all, "sampling", `{}`, Unvettable},
	} {
		if got := Required(tc.caps, tc.method, json.RawMessage(tc.params)); got != tc.want {
			t.Errorf("Required(%+v, %s, %s) = %q, want %q", tc.caps, tc.method, tc.params, got, tc.want)
		}
	}
}

func TestMissing(t *testing.T) {
	reqs := map[string]json.RawMessage{
		"a": json.RawMessage(`{"method":"elicitation/create","params":{"message":"m"}}`),
		"b": json.RawMessage(`{"method":"sampling/createMessage","params":{"maxTokens":5}}`),
		"c": json.RawMessage(`{"method":"elicitation/create","params":{"message":"n"}}`),
	}
	if got := Missing(Caps{Sampling: true}, reqs); !slices.Equal(got, []string{"elicitation.form"}) {
		t.Errorf("Missing = %q", got)
	}
	if got := Missing(Caps{Sampling: true, ElicitForm: true}, reqs); got != nil {
		t.Errorf("Missing with every capability = %q", got)
	}
	if got := Missing(Caps{}, map[string]json.RawMessage{"x": json.RawMessage(`7`)}); !slices.Equal(got, []string{"invalid"}) {
		t.Errorf("Missing of a malformed entry = %q", got)
	}
	for _, c := range []Caps{{Sampling: true}, {Sampling: true, ElicitForm: true}, {}} {
		if got, want := MissingParsed(c, reqs), Missing(c, reqs); !slices.Equal(got, want) {
			t.Errorf("MissingParsed(%+v) = %q, Missing = %q", c, got, want)
		}
	}
	if got := MissingParsed(Caps{}, map[string]json.RawMessage{"x": json.RawMessage(`7`)}); !slices.Equal(got, []string{"invalid"}) {
		t.Errorf("MissingParsed of a malformed entry = %q", got)
	}
}

func TestMissingCapabilityData(t *testing.T) {
	got := string(MissingCapabilityData("elicitation.form", "sampling"))
	want := `{"requiredCapabilities":{"elicitation":{"form":{}},"sampling":{}}}`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func FuzzMissing(f *testing.F) {
	f.Add([]byte(`{"elicitation":{"url":{}}}`), []byte(`{"a":{"method":"elicitation/create","params":{"mode":"url"}}}`))
	f.Add([]byte(`{"sampling":{"tools":{}}}`), []byte(`{"a":{"method":"sampling/createMessage","params":{"tools":[1]}}}`))
	f.Add([]byte(`null`), []byte(`[]`))
	f.Fuzz(func(t *testing.T, caps, reqs []byte) {
		c := ParseCaps(caps)
		var m map[string]json.RawMessage
		if json.Unmarshal(reqs, &m) != nil {
			return
		}
		missing := Missing(c, m)
		// On the members of a parsed object, MissingParsed reads the same.
		if b := TrimSpace(reqs); len(b) > 0 && b[0] == '{' {
			if got := MissingParsed(c, SplitObject(b)); !slices.Equal(got, missing) {
				t.Fatalf("MissingParsed = %q, Missing = %q", got, missing)
			}
		}
		if !slices.IsSorted(missing) {
			t.Fatalf("Missing not sorted: %q", missing)
		}
		if len(missing) > 0 {
			var d map[string]any
			if err := json.Unmarshal(MissingCapabilityData(missing...), &d); err != nil {
				t.Fatalf("MissingCapabilityData is not JSON: %v", err)
			}
		}
		// Declaring everything leaves only unknown methods and malformed entries.
		all := Caps{ElicitForm: true, ElicitURL: true, Sampling: true, SamplingTools: true, Roots: true}
		for _, name := range Missing(all, m) {
			switch name {
			case "elicitation.form", "elicitation.url", "sampling", "sampling.tools", "roots":
				t.Fatalf("with every capability declared, %q is still missing", name)
			}
		}
	})
}

// FuzzCapsFromValue: any JSON, the decoded reading and the raw one agree.
func FuzzCapsFromValue(f *testing.F) {
	f.Add([]byte(`{"elicitation":{"url":{}},"sampling":{"tools":{}},"roots":{}}`))
	f.Add([]byte(`{"elicitation":[],"sampling":1}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var v any
		if json.Unmarshal(in, &v) != nil {
			return
		}
		if got, want := CapsFromValue(v), ParseCaps(in); got != want {
			t.Fatalf("%s: CapsFromValue %+v, ParseCaps %+v", in, got, want)
		}
	})
}

// Reading a declaration allocates nothing, in either form: an adapter
// reads one on every pause.
func TestReadCapsAllocatesNothing(t *testing.T) {
	raw := json.RawMessage(`{"elicitation":{"url":{}},"sampling":{"tools":{}},"roots":{}}`)
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	want := Caps{ElicitURL: true, Sampling: true, SamplingTools: true, Roots: true}
	var got Caps
	if n := testing.AllocsPerRun(100, func() { got = CapsFromValue(v) }); n != 0 || got != want {
		t.Errorf("CapsFromValue: %v allocations, %+v; want 0, %+v", n, got, want)
	}
	if raceEnabled {
		return // json.Valid's scanner is pooled, and the race detector drops pooled items at random
	}
	if n := testing.AllocsPerRun(100, func() { got = ParseCaps(raw) }); n != 0 || got != want {
		t.Errorf("ParseCaps: %v allocations, %+v; want 0, %+v", n, got, want)
	}
}

// TestTargetParam: the member naming a pausable call's target, once for
// the bridge's header rules, its holds and the proxy's binding.
func TestTargetParam(t *testing.T) {
	for m, want := range map[string]string{
		MethodCallTool: "name", MethodGetPrompt: "name", MethodReadResource: "uri",
		"tools/list": "", "resources/subscribe": "", "": "",
	} {
		if got := TargetParam(m); got != want {
			t.Errorf("TargetParam(%q) = %q, want %q", m, got, want)
		}
		if Pausable(m) != (want != "") {
			t.Errorf("Pausable(%q) disagrees with TargetParam", m)
		}
	}
}
