package task

import (
	"encoding/json"
	"testing"
)

// FuzzFits: the shape check of an answer (untrusted JSON from
// tasks/update) never panics, and passes only a JSON object whose members
// the request's method needs.
func FuzzFits(f *testing.F) {
	for _, s := range []string{
		`{"action":"accept","content":{"ok":true}}`, `{"action":"decline"}`, `{"action":"accept","content":7}`,
		`{"role":"assistant","model":"m","content":{"type":"text","text":"hi"}}`, `{"roots":[]}`, `null`, `[]`, `{"action":`,
	} {
		for _, m := range []string{"elicitation/create", "sampling/createMessage", "roots/list", "other"} {
			f.Add(m, []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, method string, answer []byte) {
		if !fits(method, answer) {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(answer, &m) != nil || m == nil {
			t.Fatalf("fits(%q, %q) for what is not an object", method, answer)
		}
		switch method {
		case "elicitation/create":
			var a string
			if json.Unmarshal(m["action"], &a) != nil || (a != "accept" && a != "decline" && a != "cancel") {
				t.Fatalf("an elicitation answer without a valid action fits: %q", answer)
			}
		case "sampling/createMessage", "roots/list":
		default:
			t.Fatalf("an answer to %q fits", method)
		}
	})
}
