// Package rpc is the client end of a JSON-RPC 2.0 connection to an MCP
// server that is not reached through a request-response HTTP exchange: a
// stdio child, or a 2025-11-25 session held open by the proxy. It assigns
// its own request ids (so many callers can share one connection without
// their ids colliding), routes each response to the caller that sent the
// request, and hands the server's requests and notifications to one
// handler, in the order they arrived.
//
// It knows no MCP method beyond notifications/cancelled, and copies no
// message member it does not need: params and results travel as raw JSON,
// byte for byte.
package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// Transport carries whole JSON-RPC messages to and from a server. Send
// writes one message; Recv delivers each message the server sends, in
// order, and is closed when the server is gone.
type Transport interface {
	Send(msg []byte) error
	Recv() <-chan []byte
}

// Message is one JSON-RPC message, its members as raw JSON.
type Message struct {
	ID     json.RawMessage // nil for a notification
	Method string          // "" for a response
	Params json.RawMessage
	Result json.RawMessage
	Error  json.RawMessage
}

// IsRequest reports whether m is a request (a method and an id).
func (m *Message) IsRequest() bool { return m.Method != "" && m.ID != nil }

// IsNotification reports whether m is a notification (a method, no id).
func (m *Message) IsNotification() bool { return m.Method != "" && m.ID == nil }

// ErrNotMessage is Parse's error for anything that is not one JSON-RPC
// message object.
var ErrNotMessage = errors.New("rpc: not a JSON-RPC message")

// Parse reads one JSON-RPC message.
func Parse(b []byte) (*Message, error) {
	o, err := mcpwire.ParseObject(b)
	if err != nil {
		return nil, ErrNotMessage
	}
	m := &Message{Params: o["params"], Result: o["result"], Error: o["error"]}
	if id, ok := o["id"]; ok && string(id) != "null" {
		m.ID = id
	}
	if raw, ok := o["method"]; ok {
		if m.Method, ok = mcpwire.StringValue(raw); !ok || m.Method == "" {
			return nil, ErrNotMessage
		}
	} else if m.Result == nil && m.Error == nil {
		return nil, ErrNotMessage
	}
	return m, nil
}

// Encode writes m as one compact JSON-RPC message.
func (m *Message) Encode() ([]byte, error) {
	o := mcpwire.Object{"jsonrpc": json.RawMessage(`"2.0"`)}
	if m.ID != nil {
		o["id"] = m.ID
	}
	if m.Method != "" {
		var b []byte
		b, err := mcpwire.MarshalNoEscape(m.Method)
		if err != nil {
			return nil, err
		}
		o["method"] = b
		if m.Params != nil {
			o["params"] = m.Params
		}
	} else if m.Error != nil {
		o["error"] = m.Error
	} else {
		o["result"] = m.Result
		if o["result"] == nil {
			o["result"] = json.RawMessage("{}")
		}
	}
	return o.Encode()
}

// ErrClosed is the error of a call whose connection ended before its
// response arrived.
var ErrClosed = errors.New("rpc: the server's connection ended")

// Conn is a client connection. It is safe for concurrent use.
type Conn struct {
	t       Transport
	handler func(*Message)
	done    chan struct{}

	mu      sync.Mutex
	next    int64
	pending map[string]pendingCall // nil once the connection has ended
	after   []func()               // of AfterDone, run when it ends
}

// NewConn starts reading t. handler receives every request and
// notification the server sends, one at a time on the reading goroutine,
// in order: it must not block for long (hand work to another goroutine).
// A message that is not JSON-RPC is dropped.
func NewConn(t Transport, handler func(*Message)) *Conn {
	c := &Conn{t: t, handler: handler, done: make(chan struct{}), pending: map[string]pendingCall{}}
	go c.read()
	return c
}

func (c *Conn) read() {
	defer func() {
		c.mu.Lock()
		for k, p := range c.pending {
			close(p.ch)
			delete(c.pending, k)
		}
		c.pending = nil
		after := c.after
		c.after = nil
		c.mu.Unlock()
		close(c.done)
		for _, f := range after {
			f()
		}
	}()
	for b := range c.t.Recv() {
		m, err := Parse(b)
		if err != nil {
			continue
		}
		if m.Method != "" {
			if c.handler != nil {
				c.handler(m)
			}
			continue
		}
		if m.ID == nil {
			continue
		}
		c.mu.Lock()
		p, ok := c.pending[string(m.ID)]
		delete(c.pending, string(m.ID))
		c.mu.Unlock()
		if ok {
			p.ch <- m
			if p.then != nil {
				p.then()
			}
		}
	}
}

// Done is closed once the server's connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// AfterDone arranges for f to run once, when the server's connection has
// ended: on the reading goroutine, after every call in flight was closed
// and Done was, or at once on the caller's goroutine when it has ended
// already. It spares a caller a goroutine of its own waiting on Done (its
// stack, for every connection held open).
func (c *Conn) AfterDone(f func()) {
	c.mu.Lock()
	if c.pending == nil {
		c.mu.Unlock()
		f()
		return
	}
	c.after = append(c.after, f)
	c.mu.Unlock()
}

// Call is one request in flight.
type Call struct {
	c  *Conn
	ID json.RawMessage // the id the connection gave it
	ch chan *Message
}

// pendingCall is a call waiting for its response.
type pendingCall struct {
	ch   chan *Message
	then func() // of StartThen; nil for none
}

// Start sends a request and returns at once; its response arrives on
// Response.
func (c *Conn) Start(method string, params json.RawMessage) (*Call, error) {
	return c.StartThen(method, params, nil)
}

// StartThen is Start, and runs then on the reading goroutine as soon as
// the call's response was delivered, before any later message of the
// server reaches the handler: what the server sends after its response
// can be told from what it sent before. then must not block. It does not
// run when the connection ends without a response or the call was
// cancelled.
func (c *Conn) StartThen(method string, params json.RawMessage, then func()) (*Call, error) {
	c.mu.Lock()
	if c.pending == nil {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.next++
	id := json.RawMessage(strconv.FormatInt(c.next, 10))
	ch := make(chan *Message, 1)
	c.pending[string(id)] = pendingCall{ch: ch, then: then}
	c.mu.Unlock()
	b, err := (&Message{ID: id, Method: method, Params: params}).Encode()
	if err == nil {
		err = c.t.Send(b)
	}
	if err != nil {
		c.forget(id)
		return nil, fmt.Errorf("rpc: send %s: %w", method, err)
	}
	return &Call{c: c, ID: id, ch: ch}, nil
}

func (c *Conn) forget(id json.RawMessage) {
	c.mu.Lock()
	if c.pending != nil {
		delete(c.pending, string(id))
	}
	c.mu.Unlock()
}

// Response delivers the call's response once; it is closed without one
// when the connection ends first.
func (cl *Call) Response() <-chan *Message { return cl.ch }

// Cancel tells the server the call is abandoned (notifications/cancelled)
// and stops waiting for its response.
func (cl *Call) Cancel(reason string) {
	cl.c.forget(cl.ID)
	params, _ := json.Marshal(struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason,omitempty"`
	}{cl.ID, reason})
	_ = cl.c.Notify("notifications/cancelled", params)
}

// Call sends a request and waits for its response. When ctx ends first
// the request is cancelled and ctx's error returned.
func (c *Conn) Call(ctx context.Context, method string, params json.RawMessage) (*Message, error) {
	cl, err := c.Start(method, params)
	if err != nil {
		return nil, err
	}
	select {
	case m, ok := <-cl.ch:
		if !ok {
			return nil, ErrClosed
		}
		return m, nil
	case <-ctx.Done():
		cl.Cancel(context.Cause(ctx).Error())
		return nil, ctx.Err()
	}
}

// Notify sends a notification.
func (c *Conn) Notify(method string, params json.RawMessage) error {
	b, err := (&Message{Method: method, Params: params}).Encode()
	if err != nil {
		return err
	}
	return c.t.Send(b)
}

// Respond answers a request of the server with a result.
func (c *Conn) Respond(id, result json.RawMessage) error {
	b, err := (&Message{ID: id, Result: result}).Encode()
	if err != nil {
		return err
	}
	return c.t.Send(b)
}

// RespondError answers a request of the server with an error.
func (c *Conn) RespondError(id json.RawMessage, code int, message string) error {
	e, err := mcpwire.MarshalNoEscape(struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, message})
	if err != nil {
		return err
	}
	b, err := (&Message{ID: id, Error: e}).Encode()
	if err != nil {
		return err
	}
	return c.t.Send(b)
}
