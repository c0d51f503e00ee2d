package rpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// DefaultMaxLine caps one message of a Lines transport.
const DefaultMaxLine = 4 << 20

// Lines is the stdio framing of MCP: one JSON-RPC message per line, UTF-8,
// no newline inside a message. It is a Transport over any reader and
// writer (a child's stdout and stdin, a pipe in a test). Send is safe for
// concurrent use; messages never interleave.
type Lines struct {
	w    io.Writer
	wmu  sync.Mutex
	recv chan []byte
	done chan struct{}
	err  error // why reading ended; set before done is closed
}

// ErrLineTooLong is the reading error of a line longer than the limit.
var ErrLineTooLong = errors.New("rpc: a message line exceeds the limit")

// NewLines reads r until it ends or a line exceeds max bytes (0 means
// DefaultMaxLine) and writes to w.
func NewLines(r io.Reader, w io.Writer, max int) *Lines {
	if max <= 0 {
		max = DefaultMaxLine
	}
	l := &Lines{w: w, recv: make(chan []byte, 16), done: make(chan struct{})}
	go l.read(r, max)
	return l
}

func (l *Lines) read(r io.Reader, max int) {
	defer close(l.done)
	defer close(l.recv)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, min(64<<10, max)), max) // a larger first buffer would let longer lines through
	for sc.Scan() {
		line := bytes.TrimRight(sc.Bytes(), "\r")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		l.recv <- bytes.Clone(line)
	}
	l.err = sc.Err()
	if errors.Is(l.err, bufio.ErrTooLong) {
		l.err = ErrLineTooLong
	}
}

// Recv implements Transport.
func (l *Lines) Recv() <-chan []byte { return l.recv }

// Err reports why reading ended (nil at a clean end of input), once Recv
// is closed.
func (l *Lines) Err() error {
	<-l.done
	return l.err
}

// ErrNewline is Send's error for a message that is not one line of JSON.
var ErrNewline = errors.New("rpc: a message must be one line of JSON")

// Send implements Transport: it writes msg and a newline. A message with a
// line break inside is compacted first (it is whitespace between tokens in
// valid JSON); one that is not valid JSON is refused.
func (l *Lines) Send(msg []byte) error {
	if bytes.ContainsAny(msg, "\r\n") {
		var buf bytes.Buffer
		if err := json.Compact(&buf, msg); err != nil {
			return ErrNewline
		}
		msg = buf.Bytes()
	}
	out := make([]byte, 0, len(msg)+1)
	out = append(append(out, msg...), '\n')
	l.wmu.Lock()
	defer l.wmu.Unlock()
	_, err := l.w.Write(out)
	return err
}
