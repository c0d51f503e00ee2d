package proxy_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/replay"
)

// TestSealedStateSpliced: the proxy puts the sealed requestState into the
// upstream's final message in place, every other byte as the upstream
// wrote it (its member order, its spacing, its escapes); a message or
// result that repeats a member name, the upstream's requestState among
// them, is rebuilt from its parsed members instead, so the client never
// gets a second requestState: the upstream's own, in plaintext.
func TestSealedStateSpliced(t *testing.T) {
	const secret = "upstream-plaintext"
	reqs := `"inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"ok \u003c?","requestedSchema":{"type":"object"}}}}`
	for _, tc := range []struct {
		name   string
		result string // the upstream's result members
		exact  bool   // the rest of the message passes byte for byte
	}{
		{"state", `"resultType" : "input_required", ` + reqs + `, "requestState" : "` + secret + `", "z":1`, true},
		{"null state", `"resultType":"input_required",` + reqs + `,"requestState":null`, true},
		{"no state", `"resultType":"input_required",` + reqs, true},
		{"repeated state", `"resultType":"input_required",` + reqs + `,"requestState":"` + secret + `","requestState":"` + secret + `2"`, false},
		{"escaped repeat", `"resultType":"input_required",` + reqs + `,"requestState":"` + secret + `","\u0072equestState":"` + secret + `2"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sent string
			up := newScripted(t, func(w http.ResponseWriter, m rpcMsg) {
				sent = `{"jsonrpc":"2.0", "id":` + string(m.ID) + `, "result":{` + tc.result + `}}`
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(sent))
			})
			px := startProxy(t, up.url(), nil, &mrtr.Options{Store: replay.NewMemory(nil)}, nil)
			r := send(t, px.URL, rpcBody(1, "tools/call", `"name":"ask"`), nil)
			tok := r.state()
			if r.resultType() != "input_required" || !strings.HasPrefix(tok, "v1.") {
				t.Fatalf("not a sealed pause: %s", r.raw)
			}
			if bytes.Contains(r.raw, []byte(secret)) {
				t.Fatalf("the upstream's own requestState reached the client: %s", r.raw)
			}
			if n := bytes.Count(r.raw, []byte(`equestState"`)); n != 1 {
				t.Fatalf("%d requestState members reached the client: %s", n, r.raw)
			}
			if !tc.exact {
				return
			}
			// The client's message is the upstream's with the state's value
			// replaced (or the member added first in the result).
			q, _ := json.Marshal(tok)
			var upID json.RawMessage // the proxy's own id, the caller's back in its place
			json.Unmarshal([]byte(sent), &struct{ ID *json.RawMessage }{&upID})
			want := strings.Replace(sent, `"id":`+string(upID), `"id":1`, 1)
			switch {
			case strings.Contains(want, `"requestState" : "`+secret+`"`):
				want = strings.Replace(want, `"`+secret+`"`, string(q), 1)
			case strings.Contains(want, `"requestState":null`):
				want = strings.Replace(want, `"requestState":null`, `"requestState":`+string(q), 1)
			default:
				want = strings.Replace(want, `"result":{`, `"result":{"requestState":`+string(q)+`,`, 1)
			}
			if got := string(bytes.TrimSpace(r.raw)); got != want {
				t.Fatalf("client got\n%s\nwant\n%s", got, want)
			}
		})
	}
}
