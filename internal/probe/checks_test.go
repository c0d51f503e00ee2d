package probe

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/reqstate"
)

func pauseOf(keys ...string) Outcome {
	o := Outcome{Kind: KindPause, Requests: map[string]json.RawMessage{}}
	for _, k := range keys {
		o.Requests[k] = json.RawMessage(`{}`)
	}
	return o
}

// TestJudge pins what counts as a refusal, given the honest retry.
func TestJudge(t *testing.T) {
	first := []string{"confirm"}
	rpcErr := Outcome{Kind: KindError, Code: -32602, Message: "invalid requestState"}
	declined := Outcome{Kind: KindToolError, Text: "cancelled"}
	done := Outcome{Kind: KindComplete, Text: "ok"}
	for _, tc := range []struct {
		name        string
		got, honest Outcome
		want        Judgement
	}{
		{"error", rpcErr, done, Refused},
		{"error like the honest retry's", rpcErr, rpcErr, Inconclusive},
		{"error with the honest retry's code, another message", Outcome{Kind: KindError, Code: -32602, Message: "tampered"}, rpcErr, Refused},
		{"no answer (a timeout)", Outcome{Kind: KindNone, Err: errTimedOut}, done, Inconclusive},
		{"no answer, as honestly", Outcome{Kind: KindNone, Err: errTimedOut}, Outcome{Kind: KindNone, Err: errTimedOut}, Inconclusive},
		{"HTTP 413", Outcome{Kind: KindHTTP, Status: 413}, done, Refused},
		{"isError of its own", Outcome{Kind: KindToolError, Text: "bad state"}, declined, Refused},
		{"the decline path's isError", declined, declined, Accepted},
		{"started over", pauseOf("confirm"), done, Refused},
		{"started over, as honestly", pauseOf("confirm"), pauseOf("confirm"), Inconclusive},
		{"moved on", pauseOf("step2"), pauseOf("step2"), Accepted},
		{"completed", done, declined, Accepted},
	} {
		if got := Judge(tc.got, tc.honest, first); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestVariants: every tampering changes the state; the flips keep it in
// its alphabet; the end flip of a base64 tail changes the decoded bytes.
func TestVariants(t *testing.T) {
	for _, s := range []string{"tampered_state", `{"to":"bob","amount":5}`, "v1.k1.QUJDREVGR0hJSktMTU5PUA"} {
		for _, v := range Variants {
			got, ok := v.Alter(s)
			if !ok || got == s {
				t.Errorf("%s of %q: unchanged", v.Name, s)
			}
			if strings.Contains(v.Name, "flip") && len(got) != len(s) {
				t.Errorf("%s of %q: %q", v.Name, s, got)
			}
		}
	}
	tail := base64.RawURLEncoding.EncodeToString(make([]byte, 32)) // last character carries 2 padding bits
	got, _ := flipEnd(tail)
	b, err := base64.RawURLEncoding.DecodeString(got)
	if err == nil && string(b) == string(make([]byte, 32)) {
		t.Errorf("end flip %q decodes to the same bytes", got)
	}
	if FlipMiddle("round=1") == "round=1" {
		t.Error("FlipMiddle left the state alone")
	}
}

// TestReadable: plain and encoded data is readable; an mrtr token is not.
func TestReadable(t *testing.T) {
	args := map[string]any{"service": "billing", "n": 3}
	for _, s := range []string{
		"env=production", "round=2;name=unknown", "tampered_state", `{"to":"bob"}`,
		base64.StdEncoding.EncodeToString([]byte(`{"service":"billing"}`)),
		"v1." + base64.RawURLEncoding.EncodeToString([]byte(`{"p":1,"exp":2}`)) + ".c2ln",
		"xx-billing-xx",
	} {
		if _, ok := Readable(s, args); !ok {
			t.Errorf("%q: not readable", s)
		}
	}
	ring, err := reqstate.GenerateKeyRing("2026-11", nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := reqstate.New(ring, nil).Seal(reqstate.Binding{Method: "tools/call", Target: "deploy"}, &reqstate.State{
		Continuation: json.RawMessage(`{"service":"billing"}`), Round: 1, IssuedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if how, ok := Readable(tok, args); ok {
		t.Errorf("an mrtr token reads as %s", how)
	}
}

// TestPlaceholders: required arguments get an enum's first value, the
// default, or a placeholder of their type.
func TestPlaceholders(t *testing.T) {
	got := Placeholders(json.RawMessage(`{"type":"object","required":["env","n","ok","name","max"],"properties":{
		"env":{"type":"string","enum":["staging","production"]},"n":{"type":"integer"},"ok":{"type":"boolean"},
		"name":{"type":"string"},"max":{"type":"integer","default":100},"opt":{"type":"string"}}}`))
	b, _ := json.Marshal(got)
	if string(b) != `{"env":"staging","max":100,"n":1,"name":"mrtr-probe","ok":false}` {
		t.Errorf("placeholders %s", b)
	}
}
