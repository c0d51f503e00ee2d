package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/mrtr-go/mrtr/internal/stdio"
)

// ErrNoRunner is Dial's error when nothing answers at the socket.
var ErrNoRunner = errors.New("no runner answers at the socket")

// Conn is one connection to a runner: one child of its command, to the
// proxy what a stdio.Child is (Send, Recv, Done, Close). Its methods are
// safe for concurrent use.
type Conn struct {
	path    string
	c       *net.UnixConn
	max     int
	msgs    chan []byte
	done    chan struct{} // the reader has returned: the connection is closed
	abandon chan struct{} // Close: nobody receives any more
	once    sync.Once
	sendMu  sync.Mutex
}

// DialOptions configures Dial; the zero value is fine.
type DialOptions struct {
	// MaxMessageBytes caps one message line from the runner, its line
	// ending not counted; a longer one closes the connection. Zero or
	// less: stdio.DefaultMaxMessageBytes.
	MaxMessageBytes int
}

// Dial connects to the runner listening at path: a fresh child of its
// command. The error names the socket; ErrNoRunner when nothing listens
// there.
func Dial(ctx context.Context, path string, opts DialOptions) (*Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrNoRunner, path, err)
	}
	c := &Conn{path: path, c: nc.(*net.UnixConn), max: opts.MaxMessageBytes,
		msgs: make(chan []byte), done: make(chan struct{}), abandon: make(chan struct{})}
	if c.max <= 0 {
		c.max = stdio.DefaultMaxMessageBytes
	}
	go c.read()
	return c, nil
}

// Path is the socket c is connected to.
func (c *Conn) Path() string { return c.path }

// read delivers the runner's lines until the connection ends; then it
// closes it, so that Send fails too.
func (c *Conn) read() {
	defer close(c.done)
	defer close(c.msgs)
	defer c.c.Close()
	_ = readLines(c.c, c.max, func(line []byte) error {
		msg := append([]byte(nil), line...) // the receiver's own
		select {
		case c.msgs <- msg:
		case <-c.abandon: // dropped: Close waits for the end, not for a receiver
		}
		return nil
	})
}

// Recv returns the channel of the child's messages, each without its line
// ending, in order; it is closed when the connection ends (the child
// exited, the runner stopped it, or Close).
func (c *Conn) Recv() <-chan []byte { return c.msgs }

// Done is closed once the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Send writes msg and a newline, whole, never interleaved with another
// Send. A msg containing a newline is compacted if it is valid JSON, else
// refused with stdio.ErrInvalidMessage, as is an empty one; once the
// connection has ended the error wraps stdio.ErrExited.
func (c *Conn) Send(msg []byte) error {
	if bytes.ContainsAny(msg, "\r\n") {
		var buf bytes.Buffer
		if err := json.Compact(&buf, msg); err != nil {
			return fmt.Errorf("%w: contains a newline and is not valid JSON", stdio.ErrInvalidMessage)
		}
		msg = buf.Bytes()
	}
	if len(bytes.TrimSpace(msg)) == 0 {
		return fmt.Errorf("%w: empty", stdio.ErrInvalidMessage)
	}
	line := append(append(make([]byte, 0, len(msg)+1), msg...), '\n')
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	select {
	case <-c.done:
		return fmt.Errorf("send to the runner at %s: %w", c.path, stdio.ErrExited)
	default:
	}
	if _, err := c.c.Write(line); err != nil {
		return fmt.Errorf("send to the runner at %s: %w: %w", c.path, stdio.ErrExited, err)
	}
	return nil
}

// CloseWait bounds Close's wait for the runner to end the child: the
// runner's stop takes two stdio.DefaultStopGrace at most (then SIGKILL).
const CloseWait = 2*stdio.DefaultStopGrace + 2*time.Second

// Close stops the child as stdio.Child.Stop does: it ends the
// connection's sending half (the child's stdin), on which the runner
// stops the child (its grace, then SIGTERM, then SIGKILL), and waits for
// the runner to close the connection once the child has ended. Messages
// not yet received are dropped. When ctx ends first, or CloseWait has
// passed, the connection is closed at once, and Close returns ctx.Err()
// (or nil). It is idempotent.
func (c *Conn) Close(ctx context.Context) error {
	c.once.Do(func() {
		close(c.abandon)
		if err := c.c.CloseWrite(); err != nil {
			c.c.Close()
		}
	})
	bound := time.NewTimer(CloseWait)
	defer bound.Stop()
	select {
	case <-c.done:
		return nil
	case <-bound.C:
		c.c.Close()
		<-c.done
		return nil
	case <-ctx.Done():
		c.c.Close()
		<-c.done
		return ctx.Err()
	}
}
