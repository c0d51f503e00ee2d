package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/rpc"
)

// scripted is a fake 2025-11-25 upstream over in-process pipes, framed as
// a child's stdio: it answers initialize, hands each tools/call to the
// test's onCall and what follows notifications/initialized to onReady, and
// passes the answers to its own requests to answers.
type scripted struct {
	*rpc.Lines            // the bridge's end
	srv        *rpc.Lines // the child's end
	answers    chan *rpc.Message
	closed     chan struct{}
	once       sync.Once
	pipes      []io.Closer
}

func (c *scripted) Close(context.Context) error {
	c.once.Do(func() {
		for _, p := range c.pipes {
			p.Close()
		}
		close(c.closed)
	})
	return nil
}

// send writes one message as the child; false once its pipes are closed.
func (c *scripted) send(v any) bool {
	b, _ := json.Marshal(v)
	return c.srv.Send(b) == nil
}

func (c *scripted) serve(sc *script) {
	for b := range c.srv.Recv() {
		m, err := rpc.Parse(b)
		if err != nil {
			continue
		}
		switch {
		case m.Method == "initialize":
			c.send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{
				"protocolVersion": LegacyVersion, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "scripted", "version": "1"}}})
		case m.Method == "notifications/initialized" && sc.onReady != nil:
			go sc.onReady(c)
		case m.Method == "tools/call" && sc.onCall != nil:
			go sc.onCall(c, m.ID)
		case m.Method == "":
			select {
			case c.answers <- m:
			default:
			}
		}
	}
}

// script starts a scripted child for every Dial.
type script struct {
	onCall  func(c *scripted, id json.RawMessage)
	onReady func(c *scripted)

	mu      sync.Mutex
	started []*scripted
}

func (sc *script) dial(context.Context) (Upstream, error) {
	cr, sw := io.Pipe() // child -> bridge
	sr, cw := io.Pipe() // bridge -> child
	c := &scripted{Lines: rpc.NewLines(cr, cw, 0), srv: rpc.NewLines(sr, sw, 0), answers: make(chan *rpc.Message, 64),
		closed: make(chan struct{}), pipes: []io.Closer{cr, sw, sr, cw}}
	go c.serve(sc)
	sc.mu.Lock()
	sc.started = append(sc.started, c)
	sc.mu.Unlock()
	return c, nil
}

func (sc *script) child(i int) *scripted {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.started[i]
}

// logNote is a notifications/message whose data is n bytes long.
func logNote(i, n int) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{
		"level": "info", "logger": fmt.Sprint(i), "data": strings.Repeat("x", n)}}
}

// modernCall posts a 2026-07-28 tools/call straight to b (as the proxy
// does once its guard checked it) and returns the JSON-RPC answer and the
// log notifications streamed before it.
func modernCall(t *testing.T, b *Bridge, state string, answers map[string]any) (msg map[string]any, logs int) {
	t.Helper()
	params := map[string]any{"name": "flood", "arguments": map[string]any{},
		"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": ModernVersion,
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}}}}
	if state != "" {
		params["requestState"], params["inputResponses"] = state, answers
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params})
	req, _ := http.NewRequest(http.MethodPost, "http://legacy.bridge/mcp", bytes.NewReader(body))
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := b.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	for _, m := range readMessages(t, resp) {
		if m["method"] == "notifications/message" {
			logs++
		} else if m["id"] != nil {
			msg = m
		}
	}
	if msg == nil {
		t.Fatal("no answer to the call")
	}
	return msg, logs
}

// readMessages reads a response's JSON-RPC messages: its JSON body, or
// the data of each event of its event stream.
func readMessages(t *testing.T, resp *http.Response) []map[string]any {
	t.Helper()
	var out []map[string]any
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatalf("not JSON-RPC: %v", err)
		}
		return append(out, m)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("event not JSON-RPC: %s", d)
		}
		out = append(out, m)
	}
	return out
}

// eventually waits for cond, failing with what after 10 s: not a timing
// assertion, a guard against a hang.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
	}
}

// heldQueue reports the queue of the one session's call in flight.
func heldQueue(b *Bridge) (n, size int, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.sessions {
		s.mu.Lock()
		a := s.active
		s.mu.Unlock()
		if a == nil {
			return 0, 0, false
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		n, size = a.queue.size()
		return n, size, true
	}
	return 0, 0, false
}

// TestHeldQueueBounded (issue 27, item 3): a child that asks for input
// and then floods notifications while its call is held (nobody reads
// them) gets a queue filled to its bound and no further: the rest are
// dropped and counted. The resume gets what was kept and the result, and
// the session is reused.
func TestHeldQueueBounded(t *testing.T) {
	for _, c := range []struct {
		name          string
		max, maxBytes int
		size, n       int // of the flood's notifications, how many
	}{
		{"bytes", 0, 1 << 20, 64 << 10, 100}, // about 16 fit in a MiB
		{"count", 16, 0, 100, 500},
	} {
		t.Run(c.name, func(t *testing.T) {
			flood, sent := make(chan struct{}), make(chan struct{})
			sc := &script{onCall: func(ch *scripted, id json.RawMessage) {
				ch.send(map[string]any{"jsonrpc": "2.0", "id": "e1", "method": "elicitation/create",
					"params": map[string]any{"message": "?", "requestedSchema": map[string]any{"type": "object"}}})
				<-flood
				for i := range c.n {
					ch.send(logNote(i, c.size))
				}
				close(sent)
				<-ch.answers
				ch.send(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": "done"}}}})
			}}
			b := New(Options{Dial: sc.dial, MaxQueue: c.max, MaxQueueBytes: c.maxBytes})
			defer b.Close(context.Background())
			max, maxBytes := b.o.MaxQueue, b.o.MaxQueueBytes
			first, _ := modernCall(t, b, "", nil)
			res, _ := first["result"].(map[string]any)
			st, _ := res["requestState"].(string)
			if res["resultType"] != "input_required" || st == "" {
				t.Fatalf("first round: %v", first)
			}
			close(flood)
			<-sent
			var n, size int
			eventually(t, "every notification queued or dropped", func() bool {
				var ok bool
				n, size, ok = heldQueue(b)
				return ok && int(b.Stats().Dropped)+n == c.n
			})
			if n > max || size > maxBytes {
				t.Fatalf("the held call's queue has %d messages of %d bytes, beyond its bounds %d and %d", n, size, max, maxBytes)
			}
			if n == 0 || (c.max > 0 && n != max) || (c.maxBytes > 0 && size+c.size <= maxBytes) {
				t.Fatalf("the held call's queue has %d messages of %d bytes, short of its bounds %d and %d", n, size, max, maxBytes)
			}
			var key string
			for k := range res["inputRequests"].(map[string]any) {
				key = k
			}
			last, logs := modernCall(t, b, st, map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{}}})
			if r, _ := last["result"].(map[string]any); r == nil || !strings.Contains(fmt.Sprint(r["content"]), "done") {
				t.Fatalf("resume: %v", last)
			}
			if logs != n {
				t.Fatalf("the resume streamed %d of the %d notifications kept", logs, n)
			}
			if got := b.Stats(); got.Sessions != 1 || got.Idle != 1 || got.Holds != 0 || got.Dropped != int64(c.n-n) {
				t.Fatalf("after the call: %+v, want the session idle and %d dropped", got, c.n-n)
			}
			select {
			case <-sc.child(0).closed:
				t.Fatal("the child was stopped for notifications")
			default:
			}
		})
	}
}

// TestHeldQueueFloodedWithRequests (issue 27, item 3): requests beyond
// the bound of a held call's queue are the child's protocol error: the
// child is stopped, the hold ends and the resume gets a JSON-RPC error;
// the session is never handed out again.
func TestHeldQueueFloodedWithRequests(t *testing.T) {
	flood := make(chan struct{})
	sc := &script{onCall: func(ch *scripted, id json.RawMessage) {
		ch.send(map[string]any{"jsonrpc": "2.0", "id": "e1", "method": "elicitation/create",
			"params": map[string]any{"message": "?", "requestedSchema": map[string]any{"type": "object"}}})
		<-flood
		for i := 0; ch.send(map[string]any{"jsonrpc": "2.0", "id": fmt.Sprint("r", i), "method": "sampling/createMessage",
			"params": map[string]any{"maxTokens": 1, "messages": []any{}}}); i++ {
		}
	}}
	b := New(Options{Dial: sc.dial, MaxQueue: 8})
	defer b.Close(context.Background())
	first, _ := modernCall(t, b, "", nil)
	res, _ := first["result"].(map[string]any)
	st, _ := res["requestState"].(string)
	if res["resultType"] != "input_required" {
		t.Fatalf("first round: %v", first)
	}
	b.mu.Lock()
	var s *session
	for x := range b.sessions {
		s = x
	}
	b.mu.Unlock()
	close(flood) // the child sends requests until it is stopped
	select {
	case <-sc.child(0).closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the child flooding its held call with requests was not stopped")
	}
	s.mu.Lock()
	a, dead := s.active, s.dead
	s.mu.Unlock()
	if !dead {
		t.Fatal("the flooded session is not dead: it could be handed out again")
	}
	if a != nil {
		a.mu.Lock()
		n, _ := a.queue.size()
		a.mu.Unlock()
		if n > 1 {
			t.Fatalf("the flooded queue still holds %d messages", n)
		}
	}
	eventually(t, "the session and hold forgotten", func() bool {
		st := b.Stats()
		return st.Sessions == 0 && st.Holds == 0
	})
	var key string
	for k := range res["inputRequests"].(map[string]any) {
		key = k
	}
	late, _ := modernCall(t, b, st, map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{}}})
	if e, _ := late["error"].(map[string]any); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "start the call over") {
		t.Fatalf("the resume of the flooded call: %v", late)
	}
}

// legacyPost sends one 2025-11-25 message on session id ("" for an
// initialize) straight to b and returns the response, body unread.
func legacyPost(t *testing.T, b *Bridge, id, accept string, msg map[string]any) *http.Response {
	t.Helper()
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequest(http.MethodPost, "http://legacy.bridge/mcp", bytes.NewReader(body))
	req.Header.Set("Accept", accept)
	if id != "" {
		req.Header.Set(sessionHeader, id)
	}
	resp, err := b.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// legacyInit opens a 2025-11-25 session on b and returns its id.
func legacyInit(t *testing.T, b *Bridge) string {
	t.Helper()
	resp := legacyPost(t, b, "", "application/json, text/event-stream", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": LegacyVersion, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "c", "version": "1"}}})
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	id := resp.Header.Get(sessionHeader)
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d", resp.StatusCode)
	}
	resp = legacyPost(t, b, id, "application/json, text/event-stream", map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d", resp.StatusCode)
	}
	return id
}

func (b *Bridge) legacySession(id string) *lsession {
	b.legacy.mu.Lock()
	defer b.legacy.mu.Unlock()
	return b.legacy.byID[id]
}

// TestLegacyBacklogBounded (issue 27, item 3; the mutation audit's "no
// backlog cap"): what a child sends outside any request while its
// client has no GET stream open waits within the queue's bound; the rest
// is dropped and counted, and the GET stream, once open, gets what was
// kept, in order.
func TestLegacyBacklogBounded(t *testing.T) {
	const n, max = 300, 16
	sent := make(chan struct{})
	sc := &script{onReady: func(ch *scripted) {
		for i := range n {
			ch.send(logNote(i, 10))
		}
		close(sent)
	}}
	b := New(Options{Dial: sc.dial, MaxQueue: max})
	defer b.Close(context.Background())
	id := legacyInit(t, b)
	<-sent
	s := b.legacySession(id)
	var kept int
	eventually(t, "every notification kept or dropped", func() bool {
		kept, _ = s.backlog.size()
		return int(b.Stats().Dropped)+kept == n
	})
	if kept != max {
		t.Fatalf("the backlog keeps %d messages, want its bound %d", kept, max)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://legacy.bridge/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(sessionHeader, id)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := b.RoundTrip(req.WithContext(ctx))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %v %v", resp, err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	for i := 0; i < kept; {
		l, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := strings.CutPrefix(strings.TrimSpace(l), "data: "); ok {
			if !strings.Contains(d, fmt.Sprintf(`"logger":"%d"`, i)) {
				t.Fatalf("event %d of the backlog: %s", i, d)
			}
			i++
		}
	}
	select {
	case <-sc.child(0).closed:
		t.Fatal("the child was stopped for notifications")
	default:
	}
}

// TestLegacyQueueFlooded (issue 27, item 3): a child that sends requests
// beyond the bound of a 2025-11-25 session's queue (here the GET stream's,
// which nobody reads) has its session ended: the child is stopped and the
// session's id is unknown (404) from then on.
func TestLegacyQueueFlooded(t *testing.T) {
	sc := &script{onReady: func(ch *scripted) {
		for i := 0; ch.send(map[string]any{"jsonrpc": "2.0", "id": fmt.Sprint("r", i), "method": "elicitation/create", "params": map[string]any{"message": "?"}}); i++ {
		}
	}}
	b := New(Options{Dial: sc.dial, MaxQueue: 8})
	defer b.Close(context.Background())
	id := legacyInit(t, b)
	select {
	case <-sc.child(0).closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the child flooding its session with requests was not stopped")
	}
	resp := legacyPost(t, b, id, "application/json, text/event-stream", map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the flooded session's id: %d, want 404", resp.StatusCode)
	}
	if st := b.Stats(); st.Sessions != 0 {
		t.Fatalf("after the flood: %+v", st)
	}
}

// TestLegacySlowReader (issue 27, item 3): a 2025-11-25 client that does
// not read its request's event stream while the child floods
// notifications has them queued within the bound and the rest dropped;
// the response still reaches it, after what was kept.
func TestLegacySlowReader(t *testing.T) {
	const n, max = 400, 16
	sc := &script{onCall: func(ch *scripted, id json.RawMessage) {
		for i := range n {
			ch.send(logNote(i, 10))
		}
		ch.send(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": "done"}}}})
	}}
	b := New(Options{Dial: sc.dial, MaxQueue: max})
	defer b.Close(context.Background())
	id := legacyInit(t, b)
	s := b.legacySession(id)
	resp := legacyPost(t, b, id, "application/json, text/event-stream", map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{"name": "flood"}})
	defer resp.Body.Close()
	var q *queue
	eventually(t, "the response routed", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.posts) == 1 {
			q = s.posts[0].q
		}
		return q != nil && len(s.posts) == 0
	})
	if k, _ := q.size(); k > max {
		t.Fatalf("the unread request's queue holds %d messages, beyond its bound %d", k, max)
	}
	msgs := readMessages(t, resp)
	if len(msgs) == 0 || msgs[len(msgs)-1]["result"] == nil {
		t.Fatalf("the response did not arrive last: %v", msgs[len(msgs)-1:])
	}
	if got, dropped := len(msgs)-1, int(b.Stats().Dropped); dropped == 0 || got+dropped != n {
		t.Fatalf("%d notifications delivered and %d dropped of %d", got, dropped, n)
	}
}

// TestFifo: the queue's policy, one push at a time.
func TestFifo(t *testing.T) {
	q := newFifo[string](3, 100)
	push := func(v string, size int, note bool, wantDropped int, wantOK bool) {
		t.Helper()
		if d, ok := q.push(v, size, note); d != wantDropped || ok != wantOK {
			t.Fatalf("push %s: dropped %d, ok %v; want %d, %v", v, d, ok, wantDropped, wantOK)
		}
	}
	push("big", 500, false, 0, true) // an empty queue takes any one
	if v, _ := q.pop(); v != "big" {
		t.Fatal(v)
	}
	push("n1", 10, true, 0, true)
	push("r1", 10, false, 0, true)
	push("n2", 10, true, 0, true)
	push("n3", 10, true, 1, true)  // full: dropped itself
	push("r2", 10, false, 1, true) // n1 makes room
	push("r3", 10, false, 1, true) // n2 makes room
	push("r4", 10, false, 0, false)
	if n, size := q.size(); n != 3 || size != 30 {
		t.Fatalf("size %d, %d", n, size)
	}
	if got := q.take(); strings.Join(got, " ") != "r1 r2 r3" {
		t.Fatalf("took %v", got)
	}
	push("n4", 60, true, 0, true)
	push("r5", 50, false, 1, true) // by bytes: n4 makes room
	push("r6", 60, false, 0, false)
}

// TestLegacyPostFlooded (issue 27, item 3): requests beyond the bound of
// the queue of a request whose client does not read end the session: the
// client gets what was queued and then a JSON-RPC error saying why.
func TestLegacyPostFlooded(t *testing.T) {
	const max = 8
	sc := &script{onCall: func(ch *scripted, id json.RawMessage) {
		for i := 0; ch.send(map[string]any{"jsonrpc": "2.0", "id": fmt.Sprint("r", i), "method": "elicitation/create", "params": map[string]any{"message": "?"}}); i++ {
		}
	}}
	b := New(Options{Dial: sc.dial, MaxQueue: max})
	defer b.Close(context.Background())
	id := legacyInit(t, b)
	resp := legacyPost(t, b, id, "application/json, text/event-stream", map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{"name": "flood"}})
	defer resp.Body.Close()
	select {
	case <-sc.child(0).closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the child flooding a request with requests was not stopped")
	}
	msgs := readMessages(t, resp)
	last := msgs[len(msgs)-1]
	if e, _ := last["error"].(map[string]any); e == nil || last["id"] != float64(2) || !strings.Contains(fmt.Sprint(e["message"]), "protocol error") {
		t.Fatalf("the flooded request's answer: %v", last)
	}
	if n := len(msgs) - 1; n > 2*max { // what was queued, and the batch taken before it
		t.Fatalf("%d of the child's requests reached the client, beyond twice the bound %d", n, max)
	}
}
