package adapt

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

func TestStripBadState(t *testing.T) {
	for _, c := range []struct {
		name, body string
		bad        bool
	}{
		{"number", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","requestState":5}}`, true},
		{"object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","requestState":{"s":"v1.a"}}}`, true},
		{"array in a prompt", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"x","requestState":["v1.a"]}}`, true},
		{"bool in a resource", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"x:/","requestState":true}}`, true},
		{"other case", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","RequestState":5}}`, true},
		{"escaped name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","request\u0053tate":5}}`, true},
		{"spaces", " {\"method\" : \"tools/call\" , \"params\" : { \"requestState\" : 5 } } ", true},
		{"string", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","requestState":"v1.a"}}`, false},
		{"string and a number", `{"method":"tools/call","params":{"requestState":"v1.a","REQUESTSTATE":5}}`, true},
		{"string and a long s", `{"method":"tools/call","params":{"requestState":"v1.a","requeſtState":5}}`, true},
		{"long s only", `{"method":"tools/call","params":{"name":"x","requeſtState":5}}`, true},
		{"long s, string", `{"method":"tools/call","params":{"name":"x","requeſtState":"v1.a"}}`, false},
		{"long s elsewhere", `{"method":"tools/call","params":{"name":"ſ","requestState":"v1.a"}}`, false},
		{"string, and the name in a string", `{"method":"tools/call","params":{"arguments":{"x":"requestState:5"},"requestState":"v1.a"}}`, false},
		{"name as a value", `{"method":"tools/call","params":{"x":"requestState","requestState":[]}}`, true},
		{"null", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","requestState":null}}`, false},
		{"no state", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, false},
		{"not pausable", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"requestState":5}}`, false},
		{"in arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"requestState":5}}}`, false},
		{"invalid JSON", `{"method":"tools/call","params":{"requestState":5}`, false},
		{"batch", `[{"method":"tools/call","params":{"requestState":5}}]`, false},
		{"params not an object", `{"method":"tools/call","params":["requestState",5]}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, bad := StripBadState([]byte(c.body))
			if bad != c.bad {
				t.Fatalf("bad = %v, want %v", bad, c.bad)
			}
			if !bad {
				if string(out) != c.body {
					t.Fatalf("body changed: %s", out)
				}
				return
			}
			var msg struct {
				ID     json.RawMessage
				Method string
				Params map[string]json.RawMessage
			}
			if err := json.Unmarshal(out, &msg); err != nil {
				t.Fatalf("stripped body %s: %v", out, err)
			}
			for k, v := range msg.Params {
				if strings.EqualFold(k, "requestState") && v[0] != '"' {
					t.Fatalf("stripped body still names %s: %s", k, out)
				}
			}
			if msg.Method == "" || !mcpwire.Pausable(msg.Method) || msg.Params == nil {
				t.Fatalf("stripped body lost the request: %s", out)
			}
		})
	}
}

func FuzzStripBadState(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","requestState":5}}`))
	f.Add([]byte(`{"method":"prompts/get","params":{"REQUESTSTATE":{"a":[1,2]},"name":"\u00e9"}}`))
	f.Add([]byte(`{"method":"resources/read","params":{"requestState":"x"}}`))
	f.Add([]byte(`{"method":"tools/call","params":{"requestState":"v1.a","requeſtState":5}}`))
	f.Add([]byte(`{"method":"tools/call","params":{"requeſtState":5}}`))
	f.Add([]byte(`{"method":"tools/call","params":{"arguments":{"x":"\"requestState\":5"},"requestState":"v1.a"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		out, bad := StripBadState(body)
		// The shortcut for the common resume answers as the full reading.
		if full, fullBad := stripBadState(body); fullBad != bad || string(full) != string(out) {
			t.Fatalf("StripBadState: %v %q; the full reading: %v %q", bad, out, fullBad, full)
		}
		if !bad {
			if string(out) != string(body) {
				t.Fatalf("unchanged body changed")
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("stripped body is not JSON: %q", out)
		}
		if again, bad := StripBadState(out); bad {
			t.Fatalf("stripped body still has a bad state: %q", again)
		}
	})
}

// The common resume, a string requestState, passes without the body being
// parsed here: no allocation.
func TestStripBadStateResume(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"deploy","arguments":{"service":"api","env":"production"},` +
		`"inputResponses":{"confirm":{"action":"accept","content":{"approve":true}}},"requestState":"v1.bench.AAAA","_meta":{"a":1}}}`)
	var bad bool
	if n := testing.AllocsPerRun(100, func() { _, bad = StripBadState(body) }); n != 0 || bad {
		t.Errorf("StripBadState of a resume: %v allocations, bad %v; want 0, false", n, bad)
	}
}

// TestFoldsToRequestState: the long s is the one letter outside ASCII that
// Unicode simple folding equates with a letter of "requestState", so it is
// the only one plainStates must look for.
func TestFoldsToRequestState(t *testing.T) {
	var found []rune
	for _, c := range "requestState" {
		for r := unicode.SimpleFold(c); r != c; r = unicode.SimpleFold(r) {
			if r > unicode.MaxASCII && !strings.ContainsRune(string(found), r) {
				found = append(found, r)
			}
		}
	}
	if string(found) != longS {
		t.Fatalf("letters outside ASCII that fold into requestState: %q, want %q", string(found), longS)
	}
}

// plainStates answers as a byte-by-byte folded search for the name at
// every index does: with the name at the start or the end of the body,
// next to another q, in any case, and after a partial match.
func TestPlainStatesAsNaive(t *testing.T) {
	const name = `"requeststate"`
	naive := func(b []byte) bool {
		if strings.Contains(string(b), longS) {
			return false
		}
		for i := 0; i+len(name) <= len(b); i++ {
			if !strings.EqualFold(string(b[i:i+len(name)]), name) {
				continue
			}
			j := skipJSONSpace(b, i+len(name))
			if j == len(b) || b[j] != ':' {
				continue
			}
			j = skipJSONSpace(b, j+1)
			if j < len(b) && (b[j] == '"' || strings.HasPrefix(string(b[j:]), "null")) {
				continue
			}
			return false
		}
		return true
	}
	for _, s := range []string{
		``, `q`, `"req`, `"requestState`, `"requestState"`, `"requestState":1`, `"requestState": "x"`, `"requestState" : null`,
		`"REQUESTSTATE":{}`, `"RequestState":[`, `{"a":"q` + strings.Repeat("Q", 300) + `","reQuestState":true}`,
		`"request"requestState":1`, `"requestStat":1`, `"requestStatee":1`, `"requestState""RequestState":2`,
		`qq"requestState":1qq`, `{"x":"requestState","requestState":"ok","RequestState":7}`,
		`"requestState":` + "", `"requestState":nul`, `"re` + longS + `questState":1`,
		"requestState:1", `"requestState" :`,
	} {
		if got, want := plainStates([]byte(s)), naive([]byte(s)); got != want {
			t.Errorf("%q: %v, want %v", s, got, want)
		}
	}
}
