package rpc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// patience bounds every wait of these tests: exceeding it fails the test,
// naming what did not happen, well before a test binary's timeout. A
// correct run ends each wait at once.
const patience = 10 * time.Second

// within receives from ch, failing t if nothing comes within patience.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(patience):
		t.Fatalf("%s did not happen within %v", what, patience)
		panic("unreachable")
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in      string
		ok      bool
		req     bool
		note    bool
		method  string
		hasID   bool
		isReply bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, true, true, false, "tools/call", true, false},
		{`{"jsonrpc":"2.0","method":"notifications/progress"}`, true, false, true, "notifications/progress", false, false},
		{`{"jsonrpc":"2.0","id":"a","result":{}}`, true, false, false, "", true, true},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700}}`, true, false, false, "", false, true},
		{`{"jsonrpc":"2.0","id":1}`, false, false, false, "", false, false},
		{`{"method":""}`, false, false, false, "", false, false},
		{`{"method":5}`, false, false, false, "", false, false},
		{`[1]`, false, false, false, "", false, false},
		{`{"id":1,`, false, false, false, "", false, false},
	} {
		m, err := Parse([]byte(c.in))
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v", c.in, err)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrNotMessage) {
				t.Errorf("%s: err %v, want ErrNotMessage", c.in, err)
			}
			continue
		}
		if m.IsRequest() != c.req || m.IsNotification() != c.note || m.Method != c.method || (m.ID != nil) != c.hasID {
			t.Errorf("%s: parsed %+v", c.in, m)
		}
	}
}

// FuzzParse: Parse never panics, and a message it accepts encodes to one
// it reads back the same.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[1,"x"]}}`, `{"id":"z","result":null}`, `{"method":"n"}`, `{"id":2,"error":{"code":1,"message":"é\u2028"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			return
		}
		out, err := m.Encode()
		if err != nil {
			t.Fatalf("encode %q: %v", b, err)
		}
		m2, err := Parse(out)
		if err != nil {
			t.Fatalf("re-parse of %q (from %q): %v", out, b, err)
		}
		if m2.Method != m.Method || !bytes.Equal(m2.ID, m.ID) || !bytes.Equal(m2.Params, m.Params) || !bytes.Equal(m2.Error, m.Error) {
			t.Fatalf("round trip changed %q into %q", b, out)
		}
	})
}

// TestLines: messages are one line each; a message with line breaks is
// compacted (JSON whitespace), one that is not JSON refused; an over-long
// line ends the reading with ErrLineTooLong.
func TestLines(t *testing.T) {
	var out bytes.Buffer
	l := NewLines(strings.NewReader(""), &out, 0)
	if err := l.Send([]byte("{\"a\":\n1}")); err != nil {
		t.Fatal(err)
	}
	if err := l.Send([]byte("not json\n")); !errors.Is(err, ErrNewline) {
		t.Fatalf("a non-JSON message with a newline: %v", err)
	}
	if out.String() != "{\"a\":1}\n" {
		t.Fatalf("wrote %q", out.String())
	}
	in := "\r\n{\"id\":1,\"result\":{}}\r\n\n" + strings.Repeat("x", 100) + "\n"
	l = NewLines(strings.NewReader(in), io.Discard, 64)
	var got []string
	for m := range l.Recv() {
		got = append(got, string(m))
	}
	if len(got) != 1 || got[0] != `{"id":1,"result":{}}` || !errors.Is(l.Err(), ErrLineTooLong) {
		t.Fatalf("read %q, err %v", got, l.Err())
	}
}

// pipeT is a Transport whose server side is the test.
type pipeT struct {
	sent chan []byte
	recv chan []byte
}

func (p *pipeT) Send(b []byte) error { p.sent <- append([]byte(nil), b...); return nil }
func (p *pipeT) Recv() <-chan []byte { return p.recv }

// TestConn: the connection's own ids, responses routed to their caller,
// the server's requests to the handler, a cancel on a context ending, and
// ErrClosed for calls in flight when the server goes away.
func TestConn(t *testing.T) {
	p := &pipeT{sent: make(chan []byte, 8), recv: make(chan []byte, 8)}
	var handled []string
	done := make(chan struct{}, 8)
	c := NewConn(p, func(m *Message) { handled = append(handled, m.Method); done <- struct{}{} })
	res := make(chan *Message, 1)
	go func() {
		m, err := c.Call(context.Background(), "tools/list", []byte(`{}`))
		if err != nil {
			t.Error(err)
		}
		res <- m
	}()
	req, _ := Parse(within(t, p.sent, "the request sent"))
	if string(req.ID) != "1" || req.Method != "tools/list" {
		t.Fatalf("sent %+v", req)
	}
	p.recv <- []byte(`{"jsonrpc":"2.0","id":7,"method":"roots/list"}`)
	within(t, done, "the server's request handled")
	p.recv <- []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`)
	if m := within(t, res, "the response delivered to its call"); string(m.Result) != `{"tools":[]}` || len(handled) != 1 || handled[0] != "roots/list" {
		t.Fatalf("response %+v, handled %v", m, handled)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := c.Call(ctx, "slow", nil); errc <- err }()
	within(t, p.sent, "the slow request sent")
	cancel()
	if err := within(t, errc, "the cancelled call's return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	if n, _ := Parse(within(t, p.sent, "notifications/cancelled sent")); n.Method != "notifications/cancelled" || !bytes.Contains(n.Params, []byte(`"requestId":2`)) {
		t.Fatalf("cancel sent %+v", n)
	}
	go func() { _, err := c.Call(context.Background(), "never", nil); errc <- err }()
	within(t, p.sent, "the request sent")
	close(p.recv)
	if err := within(t, errc, "the return of a call in flight when the server went away"); !errors.Is(err, ErrClosed) {
		t.Fatalf("call when the server went away: %v", err)
	}
	if _, err := c.Start("after", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("start after the end: %v", err)
	}
}

// TestAfterDone: a function registered before the end runs once it came,
// after the calls in flight were closed and Done was; one registered after
// it runs at once.
func TestAfterDone(t *testing.T) {
	p := &pipeT{sent: make(chan []byte, 8), recv: make(chan []byte, 8)}
	c := NewConn(p, nil)
	cl, err := c.Start("never", nil)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan string, 2)
	c.AfterDone(func() {
		select {
		case <-c.Done():
		default:
			t.Error("AfterDone ran before Done was closed")
		}
		select {
		case _, ok := <-cl.Response():
			if ok {
				t.Error("a response for a call of an ended connection")
			}
		default:
			t.Error("AfterDone ran before the calls in flight were closed")
		}
		ran <- "first"
	})
	close(p.recv)
	if got := within(t, ran, "the AfterDone function run at the end"); got != "first" {
		t.Fatal(got)
	}
	c.AfterDone(func() { ran <- "late" })
	select {
	case got := <-ran:
		if got != "late" {
			t.Fatal(got)
		}
	default:
		t.Fatal("AfterDone after the end did not run at once")
	}
}

// settle sends a notification after the messages under test and waits
// until the handler has it: the reader handles messages in order, so by
// then it has routed every message before it.
func settle(t *testing.T, p *pipeT, handled <-chan string) {
	t.Helper()
	p.recv <- []byte(`{"jsonrpc":"2.0","method":"notifications/message"}`)
	for within(t, handled, "the notification after the responses handled (the reader stalled?)") != "notifications/message" {
	}
}

// noResponse fails t if cl's channel holds a message.
func noResponse(t *testing.T, cl *Call, what string) {
	t.Helper()
	select {
	case m, ok := <-cl.Response():
		if ok {
			t.Fatalf("%s was delivered: %s", what, m.Result)
		}
		t.Fatalf("the call's channel was closed (%s)", what)
	default:
	}
}

// TestDuplicateResponse: a server answering one id twice gets its first
// answer delivered and the second dropped: never a second message on the
// call's channel, and never a reader stalled on it.
func TestDuplicateResponse(t *testing.T) {
	p := &pipeT{sent: make(chan []byte, 8), recv: make(chan []byte, 8)}
	handled := make(chan string, 8)
	c := NewConn(p, func(m *Message) { handled <- m.Method })
	t.Cleanup(func() { close(p.recv) })

	// The first answer received before the second arrives.
	cl, err := c.Start("a", nil)
	if err != nil {
		t.Fatal(err)
	}
	within(t, p.sent, "the request sent")
	p.recv <- []byte(`{"jsonrpc":"2.0","id":1,"result":{"n":1}}`)
	if m := within(t, cl.Response(), "the first response"); string(m.Result) != `{"n":1}` {
		t.Fatalf("first response %s", m.Result)
	}
	p.recv <- []byte(`{"jsonrpc":"2.0","id":1,"result":{"n":2}}`)
	settle(t, p, handled)
	noResponse(t, cl, "a second response for the same id")

	// Both answers arrive before the caller reads.
	cl, err = c.Start("b", nil)
	if err != nil {
		t.Fatal(err)
	}
	within(t, p.sent, "the request sent")
	p.recv <- []byte(`{"jsonrpc":"2.0","id":2,"result":{"n":1}}`)
	p.recv <- []byte(`{"jsonrpc":"2.0","id":2,"result":{"n":2}}`)
	settle(t, p, handled)
	if m := within(t, cl.Response(), "the first response"); string(m.Result) != `{"n":1}` {
		t.Fatalf("first response %s", m.Result)
	}
	noResponse(t, cl, "a second response for the same id")
}

// TestLateResponseAfterCancel: a response that arrives after its call was
// cancelled reaches nobody: not the call's channel, not the handler.
func TestLateResponseAfterCancel(t *testing.T) {
	p := &pipeT{sent: make(chan []byte, 8), recv: make(chan []byte, 8)}
	handled := make(chan string, 8)
	c := NewConn(p, func(m *Message) { handled <- m.Method })
	t.Cleanup(func() { close(p.recv) })
	cl, err := c.Start("slow", nil)
	if err != nil {
		t.Fatal(err)
	}
	within(t, p.sent, "the request sent")
	cl.Cancel("the client went away")
	if n, _ := Parse(within(t, p.sent, "notifications/cancelled sent")); n.Method != "notifications/cancelled" {
		t.Fatalf("Cancel sent %+v", n)
	}
	p.recv <- []byte(`{"jsonrpc":"2.0","id":1,"result":{"late":true}}`)
	settle(t, p, handled)
	noResponse(t, cl, "a response after Cancel")
}

// TestStartThen: then runs once the call's response is delivered and
// before the handler sees the message the server sent after it, so a
// caller can tell what came after the response from what came before.
func TestStartThen(t *testing.T) {
	p := &pipeT{sent: make(chan []byte, 8), recv: make(chan []byte, 8)}
	var mu sync.Mutex
	var order []string
	handled := make(chan struct{}, 1)
	c := NewConn(p, func(m *Message) {
		mu.Lock()
		order = append(order, "handler:"+m.Method)
		mu.Unlock()
		handled <- struct{}{}
	})
	cl, err := c.StartThen("tools/call", nil, func() {
		mu.Lock()
		order = append(order, "then")
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	within(t, p.sent, "the request sent")
	p.recv <- []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	p.recv <- []byte(`{"jsonrpc":"2.0","id":"late","method":"elicitation/create"}`)
	within(t, cl.Response(), "the response")
	within(t, handled, "the late request handled")
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(order, ",") != "then,handler:elicitation/create" {
		t.Fatalf("order %v, want then before the later message", order)
	}
}
