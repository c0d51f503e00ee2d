package proxy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/replay"
)

// TestResumeSpliced: the request the upstream receives for a call whose
// params change is the client's, byte for byte (its member order, its
// spacing inside members, its escapes), with only params.requestState
// (the upstream's own state on a resume, none on a first call) and
// params.inputResponses (only the asked answers) replaced or dropped. An
// envelope too large to splice is rebuilt from its parsed members, with
// the same members.
func TestResumeSpliced(t *testing.T) {
	const upState = `"up \u003cstate\u003e"`
	var mu sync.Mutex
	var got []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage            `json:"id"`
			Params map[string]json.RawMessage `json:"params"`
		}
		json.Unmarshal(b, &m)
		mu.Lock()
		// The proxy's own id, which the rest of the test does not compare.
		got = append(got, strings.Replace(string(b), `"id":`+string(m.ID), `"id":"UP"`, 1))
		mu.Unlock()
		result := `{"resultType":"complete","content":[]}`
		if _, ok := m.Params["requestState"]; !ok {
			result = `{"resultType":"input_required","inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"ok?","requestedSchema":{"type":"object"}}}},"requestState":` + upState + `}`
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
	}))
	t.Cleanup(up.Close)
	last := func() string {
		mu.Lock()
		defer mu.Unlock()
		return got[len(got)-1]
	}
	px := startProxy(t, up.URL+"/mcp", nil, &mrtr.Options{Store: replay.NewMemory(nil)}, nil)
	const args = `"arguments" : { "b":1,  "a":"\u003c/x\u003e" }`
	const answer = `{ "action":"accept", "content":{"ok":true} }`

	// A first call with a null state and answers nobody asked: both
	// dropped, the rest as sent.
	first := `{"method":"tools/call", "id":7,"jsonrpc":"2.0","params":{"name":"ask",` + args + `,"requestState":null,` + testMeta + `,"inputResponses":{"confirm":true}},"z":[1, 2]}`
	r := send(t, px.URL, first, nil)
	tok := r.state()
	if tok == "" {
		t.Fatalf("no pause: %s", r.raw)
	}
	want := `{"method":"tools/call", "id":"UP","jsonrpc":"2.0","params":{"name":"ask",` + args + `,` + testMeta + `},"z":[1, 2]}`
	if g := last(); g != want {
		t.Fatalf("first call: upstream got\n%s\nwant\n%s", g, want)
	}

	// A resume: the upstream's own state in place of the token, only the
	// asked answer, every other byte as the client wrote it.
	q, _ := json.Marshal(tok)
	resume := `{"method":"tools/call", "id":8,"jsonrpc":"2.0","params":{"inputResponses":{"extra":1,"confirm":` + answer + `},"name":"ask",` + args + `,"requestState" : ` + string(q) + `,` + testMeta + `},"z":[1, 2]}`
	if r = send(t, px.URL, resume, nil); r.resultType() != "complete" {
		t.Fatalf("resume: %s", r.raw)
	}
	want = `{"method":"tools/call", "id":"UP","jsonrpc":"2.0","params":{"inputResponses":{"confirm":` + answer + `},"name":"ask",` + args + `,"requestState" : ` + upState + `,` + testMeta + `},"z":[1, 2]}`
	if g := last(); g != want {
		t.Fatalf("resume: upstream got\n%s\nwant\n%s", g, want)
	}

	// An envelope of more than 16 members: rebuilt, same members.
	var extra strings.Builder
	for i := range 16 {
		fmt.Fprintf(&extra, `,"x%d":%d`, i, i)
	}
	r = send(t, px.URL, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"ask","requestState":null,`+testMeta+`}`+extra.String()+`}`, nil)
	if r.state() == "" {
		t.Fatalf("no pause: %s", r.raw)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(last()), &m); err != nil || len(m) != 20 || strings.Contains(string(m["params"]), "requestState") {
		t.Fatalf("large envelope: upstream got %s (%v)", last(), err)
	}
}
