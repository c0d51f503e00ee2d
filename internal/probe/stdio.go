package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/mrtr-go/mrtr/internal/rpc"
	"github.com/mrtr-go/mrtr/internal/stdio"
)

// StdioMaxMessageBytes caps one message a StdioTarget's server writes, as
// maxReply caps an HTTP answer; a longer line stops the server.
const StdioMaxMessageBytes = maxReply

// StdioTarget is an MCP server run as a child process and spoken to over
// its stdin and stdout (the stdio transport). StartStdio starts it; Stop
// ends it. It has one caller: the process is the probe's own, with no
// principal to tell two callers apart. Its methods other than Stop are
// for one goroutine at a time, as Target's; Stop may be called from any.
type StdioTarget struct {
	child *stdio.Child
	conn  *rpc.Conn
	// stray receives a response whose id is null (a server that could
	// not read a request answers so); the probe sends one request at a
	// time, so it answers the request in flight.
	stray chan []byte
}

// StartStdio starts the server cfg describes (run directly, never through
// a shell; its environment the caller's minus every MRTR_* variable, plus
// cfg.Env) and speaks to it. A zero cfg.MaxMessageBytes means
// StdioMaxMessageBytes.
func StartStdio(cfg stdio.Config) (*StdioTarget, error) {
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = StdioMaxMessageBytes
	}
	ch, err := stdio.Start(cfg)
	if err != nil {
		return nil, err
	}
	t := &StdioTarget{child: ch, stray: make(chan []byte, 1)}
	tap := &strayTap{child: ch, out: make(chan []byte), stray: t.stray}
	go tap.run()
	t.conn = rpc.NewConn(tap, t.serverMessage)
	return t, nil
}

// serverMessage answers the server's own requests: ping, and an error for
// anything else (a 2026-07-28 server asks for input in its results, not
// with requests). Notifications are dropped.
func (t *StdioTarget) serverMessage(m *rpc.Message) {
	if !m.IsRequest() {
		return
	}
	go func() {
		if m.Method == "ping" {
			_ = t.conn.Respond(m.ID, json.RawMessage(`{}`))
			return
		}
		_ = t.conn.RespondError(m.ID, -32601, "Method not found")
	}()
}

// HasOther implements Target: false, there is one caller.
func (t *StdioTarget) HasOther() bool { return false }

// Stdio implements Target: true.
func (t *StdioTarget) Stdio() bool { return true }

// Send implements Target. The request goes out with an id of the
// connection's own; the reply carries req.ID when the response carried
// that id, and as sent when its id was null. A response with any other id
// is not taken for the answer (the wait then ends with ctx).
func (t *StdioTarget) Send(ctx context.Context, _ Caller, req *Request) (*Reply, error) {
	select {
	case <-t.stray: // left from an earlier request
	default:
	}
	cl, err := t.conn.Start(req.Method, req.Params)
	if err != nil {
		return nil, t.ended(ctx, err)
	}
	select {
	case m, ok := <-cl.Response():
		if !ok {
			return nil, t.ended(ctx, rpc.ErrClosed)
		}
		b, err := (&rpc.Message{ID: json.RawMessage(strconv.FormatInt(req.ID, 10)), Result: m.Result, Error: m.Error}).Encode()
		if err != nil {
			return nil, fmt.Errorf("read the answer to %s: %w", req.Method, err)
		}
		return &Reply{Message: b}, nil
	case b := <-t.stray:
		cl.Cancel("answered with a null id")
		return &Reply{Message: b}, nil
	case <-ctx.Done():
		cl.Cancel("mrtr probe: no answer in time")
		return nil, fmt.Errorf("%s: %w", req.Method, ctx.Err())
	}
}

// ended describes a request that found the server's output closed: how
// the process ended, once it has (waiting for that at most until ctx
// ends: a closed stdout is normally an exit).
func (t *StdioTarget) ended(ctx context.Context, err error) error {
	select {
	case <-t.child.Done():
		if xerr := t.child.Err(); xerr != nil {
			return fmt.Errorf("the server exited: %w", xerr)
		}
		return errors.New("the server exited")
	case <-ctx.Done():
		return fmt.Errorf("the server's output ended: %w", err)
	}
}

// Stop ends the server (stdin closed, then SIGTERM, then SIGKILL to its
// process group, see stdio.Child.Stop) and returns once it is reaped;
// when ctx ends first the grace periods are cut short and ctx's error
// returned.
func (t *StdioTarget) Stop(ctx context.Context) error { return t.child.Stop(ctx) }

// strayTap is the child as the connection's transport, taking out the
// responses with a null id, which the connection would drop.
type strayTap struct {
	child *stdio.Child
	out   chan []byte
	stray chan<- []byte
}

func (s *strayTap) Send(b []byte) error { return s.child.Send(b) }
func (s *strayTap) Recv() <-chan []byte { return s.out }

func (s *strayTap) run() {
	defer close(s.out)
	for b := range s.child.Recv() {
		if m, err := rpc.Parse(b); err == nil && m.Method == "" && m.ID == nil {
			select {
			case s.stray <- b:
			default:
			}
			continue
		}
		s.out <- b
	}
}
