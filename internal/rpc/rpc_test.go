package rpc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

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
	req, _ := Parse(<-p.sent)
	if string(req.ID) != "1" || req.Method != "tools/list" {
		t.Fatalf("sent %+v", req)
	}
	p.recv <- []byte(`{"jsonrpc":"2.0","id":7,"method":"roots/list"}`)
	<-done
	p.recv <- []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`)
	if m := <-res; string(m.Result) != `{"tools":[]}` || len(handled) != 1 || handled[0] != "roots/list" {
		t.Fatalf("response %+v, handled %v", m, handled)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := c.Call(ctx, "slow", nil); errc <- err }()
	<-p.sent
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	if n, _ := Parse(<-p.sent); n.Method != "notifications/cancelled" || !bytes.Contains(n.Params, []byte(`"requestId":2`)) {
		t.Fatalf("cancel sent %+v", n)
	}
	go func() { _, err := c.Call(context.Background(), "never", nil); errc <- err }()
	<-p.sent
	close(p.recv)
	if err := <-errc; !errors.Is(err, ErrClosed) {
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
		if _, ok := <-cl.Response(); ok {
			t.Error("a response for a call of an ended connection")
		}
		ran <- "first"
	})
	close(p.recv)
	if got := <-ran; got != "first" {
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
