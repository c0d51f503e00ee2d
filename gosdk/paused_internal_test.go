package gosdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func pausedFixture(meta mcp.Meta) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Meta: meta,
		InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
			Message: "Deploy api to production?",
			RequestedSchema: &jsonschema.Schema{
				Type:       "object",
				Properties: map[string]*jsonschema.Schema{"approve": {Type: "boolean", Description: "go ahead <now> & then"}},
				Required:   []string{"approve"},
			},
		}},
		RequestState: "v1.bench.AAAA",
	}
}

// A paused tool result is go-sdk's encoding without "content": null, every
// other member as go-sdk wrote it and in its order, also with a _meta
// (written before content) that has a member named content of its own.
// Cutting the member out of go-sdk's bytes costs no allocation over
// go-sdk's encoding, where decoding and encoding the result again (with
// its schema) cost about twenty on every pause.
func TestPausedToolResultJSON(t *testing.T) {
	for _, tr := range []*mcp.CallToolResult{
		pausedFixture(nil),
		pausedFixture(mcp.Meta{"content": nil, "k": "v"}),
	} {
		sdk, err := tr.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		got, err := pausedToolResult{tr}.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		cut := `"content":null,`
		i := bytes.Index(sdk, []byte(cut))
		if tr.Meta != nil {
			i = bytes.Index(sdk, []byte(`},`+cut)) + 2 // not _meta's own member
		}
		if want := append(sdk[:i:i], sdk[i+len(cut):]...); !bytes.Equal(got, want) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
		var gm, wm map[string]json.RawMessage
		if err := json.Unmarshal(got, &gm); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(sdk, &wm); err != nil {
			t.Fatal(err)
		}
		if _, ok := gm["content"]; ok || string(wm["content"]) != "null" {
			t.Errorf("content: paused %s, go-sdk %s", gm["content"], wm["content"])
		}
		delete(wm, "content")
		if !reflect.DeepEqual(gm, wm) {
			t.Errorf("members differ:\n%s\n%s", got, sdk)
		}
	}

	// Nothing but the content: the empty object.
	if got, _ := (pausedToolResult{&mcp.CallToolResult{}}).MarshalJSON(); string(got) != `{}` {
		t.Errorf("content alone: got %s, want {}", got)
	}

	// A result whose content is not null keeps it.
	tr := pausedFixture(nil)
	tr.Content = []mcp.Content{&mcp.TextContent{Text: "so far"}}
	sdk, _ := tr.MarshalJSON()
	if got, _ := (pausedToolResult{tr}).MarshalJSON(); !bytes.Equal(got, sdk) {
		t.Errorf("with content: got %s, want %s", got, sdk)
	}

	if raceEnabled {
		return // the race detector's instrumentation allocates on its own
	}
	for _, c := range []struct {
		meta mcp.Meta
		max  float64
	}{{nil, 0}, {mcp.Meta{"io.modelcontextprotocol/serverInfo": map[string]any{"name": "bench", "version": "1"}}, 0}} {
		tr := pausedFixture(c.meta)
		base := testing.AllocsPerRun(50, func() { _, _ = tr.MarshalJSON() })
		n := testing.AllocsPerRun(50, func() { _, _ = pausedToolResult{tr}.MarshalJSON() })
		if n-base > c.max {
			t.Errorf("_meta %v: a paused result takes %v allocations over go-sdk's %v, want at most %v", c.meta, n-base, base, c.max)
		}
	}
}

// readUpTo reads what io.ReadAll(io.LimitReader(r, n)) reads, whatever
// the size hint says and however the reader splits its reads.
func TestReadUpTo(t *testing.T) {
	readers := map[string]func(string) io.Reader{
		"whole":    func(s string) io.Reader { return strings.NewReader(s) },
		"one byte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"half":     func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
		"data+EOF": func(s string) io.Reader { return iotest.DataErrReader(strings.NewReader(s)) },
	}
	for _, size := range []int{0, 1, 511, 512, 513, 2000, 5000} {
		body := strings.Repeat("x", size)
		for _, n := range []int64{1, 512, 2000, 4096, 1 << 20} {
			for _, hint := range []int64{-1, 0, int64(size) / 2, int64(size), int64(size) + 7, n - 1, n, n + 10} {
				for name, mk := range readers {
					want, werr := io.ReadAll(io.LimitReader(mk(body), n))
					got, err := readUpTo(mk(body), n, hint)
					if string(got) != string(want) || (err == nil) != (werr == nil) {
						t.Fatalf("size %d, n %d, hint %d, %s: read %d bytes (%v), want %d (%v)", size, n, hint, name, len(got), err, len(want), werr)
					}
				}
			}
		}
	}
	// A declared length is not allocated for beyond maxPresized before
	// the bytes arrive.
	for _, size := range []int64{maxPresized - 1, maxPresized, 4 << 20} {
		got, err := readUpTo(strings.NewReader("{}"), 4<<20+1, size)
		if string(got) != "{}" || err != nil {
			t.Fatalf("declared %d: read %q, %v", size, got, err)
		}
		if want := 512; size >= maxPresized && cap(got) != want {
			t.Errorf("declared %d: allocated %d bytes for a 2-byte body, want %d", size, cap(got), want)
		}
	}
	boom := errors.New("boom")
	got, err := readUpTo(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)), 100, 10)
	if string(got) != "abc" || !errors.Is(err, boom) {
		t.Errorf("read %q, %v; want abc, boom", got, err)
	}
}

// withBadState reads a declared body in one allocation and hands it on in
// one more (io.ReadAll, io.LimitReader, bytes.NewReader and io.NopCloser
// took five for this body); go-sdk still reads the same bytes, and a
// state that is not a string is still cut out and the call marked.
func TestWithBadStateAllocations(t *testing.T) {
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"deploy","arguments":{"pad":"` +
		strings.Repeat("x", 1500) + `"},"requestState":"v1.bench.AAAA"}}`
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	rd := strings.NewReader(body)
	var out *http.Request
	run := func(f func(*http.Request, int64) *http.Request) func() {
		return func() {
			rd.Reset(body)
			req.Body = io.NopCloser(rd)
			req.ContentLength = int64(len(body))
			out = f(req, 0)
		}
	}
	alone := testing.AllocsPerRun(50, run(func(r *http.Request, _ int64) *http.Request { return r }))
	n := testing.AllocsPerRun(50, run(withBadState)) - alone
	if got, _ := io.ReadAll(out.Body); string(got) != body || out.ContentLength != int64(len(body)) || badState(out.Context()) {
		t.Fatalf("passed on %d bytes (ContentLength %d), marked %v", len(got), out.ContentLength, badState(out.Context()))
	}
	if n > 2 && !raceEnabled {
		t.Errorf("withBadState takes %v allocations, want at most 2", n)
	}

	bad := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"deploy","requestState":7}}`
	req = httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(bad))
	out = withBadState(req, 0)
	got, _ := io.ReadAll(out.Body)
	var msg struct {
		Method string         `json:"method"`
		Params map[string]any `json:"params"`
	}
	if err := json.Unmarshal(got, &msg); err != nil || msg.Method != "tools/call" || !reflect.DeepEqual(msg.Params, map[string]any{"name": "deploy"}) ||
		out.ContentLength != int64(len(got)) || !badState(out.Context()) {
		t.Errorf("bad state: passed on %s (ContentLength %d), marked %v", got, out.ContentLength, badState(out.Context()))
	}

	// Over the limit, the body goes on whole, for go-sdk to refuse.
	req = httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	out = withBadState(req, 100)
	if got, _ := io.ReadAll(out.Body); string(got) != body {
		t.Errorf("over the limit: passed on %d bytes, want %d", len(got), len(body))
	}
}
