package mcpwire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
)

// This file is the one reading and writing of the event-stream format
// (text/event-stream, the HTML Living Standard's grammar) for every front
// end that rewrites an MCP response stream: the proxy reads an upstream's
// stream with EventReader, an adapter whose SDK writes a stream in pieces
// cuts it with EventSplitter, and both write an event with AppendEvent.

// Event is one server-sent event: its bytes as received (terminating
// blank line included), its data (its data lines joined with "\n") and
// its other field lines (id, event, retry, comments), without their line
// ends. Data and Other may share memory with Raw.
type Event struct {
	Raw   []byte
	Data  []byte
	Other [][]byte

	other [3][]byte // Other's array when it is short: one allocation per event
}

// ErrEventTooLarge is the error of an event beyond the reader's limit.
var ErrEventTooLarge = errors.New("server-sent event exceeds the held-message limit")

// IsEventStream reports whether a Content-Type is text/event-stream,
// whatever its case and parameters.
func IsEventStream(ct string) bool {
	const want = "text/event-stream"
	ct = strings.TrimSpace(ct)
	return len(ct) >= len(want) && strings.EqualFold(ct[:len(want)], want) &&
		(len(ct) == len(want) || ct[len(want)] == ';' || ct[len(want)] == ' ')
}

// eventParser is the grammar, fed bytes as they come. Lines end in "\n",
// "\r\n" or "\r" alone. It never waits for the byte after a CR: an LF
// that arrives next is dropped as the end of that line.
type eventParser struct {
	max    int    // bound on one event's bytes; 0 for none
	raw    []byte // the event so far, complete lines
	cur    []byte // a line whose end has not arrived
	data   [][]byte
	other  [][]byte
	skipLF bool // the last line ended in a CR: an LF right after it belongs to it
}

// idle reports whether the parser sits between events, holding nothing.
func (p *eventParser) idle() bool { return len(p.raw) == 0 && len(p.cur) == 0 && !p.skipLF }

// feed reads buf up to the end of the first event it completes: it
// returns the bytes it consumed and that event, or all of buf and nil.
func (p *eventParser) feed(buf []byte) (n int, ev *Event, err error) {
	for n < len(buf) {
		b := buf[n:]
		skip := 0
		if p.skipLF {
			p.skipLF = false
			if b[0] == '\n' {
				skip = 1
			}
		}
		m, ended := len(b), false
		if i := bytes.IndexAny(b[skip:], "\r\n"); i >= 0 {
			i += skip
			m, ended = i+1, true
			if b[i] == '\r' {
				if i+1 < len(b) {
					if b[i+1] == '\n' {
						m++
					}
				} else {
					p.skipLF = true
				}
			}
		}
		line := b[skip:m]
		if cap(p.raw) == 0 && len(p.cur) == 0 {
			p.raw = make([]byte, 0, eventSize(b[skip:], p.max))
		}
		if p.max > 0 && len(p.raw)+len(p.cur)+len(line) > p.max {
			return n, nil, ErrEventTooLarge
		}
		n += m
		if !ended {
			p.cur = append(p.cur, line...)
			continue
		}
		if len(p.cur) > 0 {
			line = append(p.cur, line...)
			p.cur = p.cur[:0:0]
		}
		if ev = p.add(line); ev != nil {
			return n, ev, nil
		}
	}
	return n, nil, nil
}

// add takes one line, its end included (none for the last line of a
// stream), and returns the event it completes.
func (p *eventParser) add(line []byte) *Event {
	start := len(p.raw)
	p.raw = append(p.raw, line...)
	body := bytes.TrimRight(p.raw[start:], "\r\n")
	switch {
	case len(body) == 0 && len(line) > 0: // blank line: the end of an event
		if start == 0 {
			p.raw = p.raw[:0] // a stray blank line
			return nil
		}
		return p.finish()
	case bytes.HasPrefix(body, []byte("data:")):
		v := body[len("data:"):]
		p.data = append(p.data, bytes.TrimPrefix(v, []byte(" ")))
	case len(body) > 0:
		p.other = append(p.other, body)
	}
	return nil
}

// finish returns the event of the lines so far. The parser keeps its
// arrays of data and other lines for the next event: the event's Other is
// its own, and its Data is a copy (bytes.Join) or a slice of its Raw.
func (p *eventParser) finish() *Event {
	ev := &Event{Raw: p.raw}
	if len(p.other) > 0 {
		ev.Other = append(ev.other[:0:len(ev.other)], p.other...)
	}
	switch len(p.data) {
	case 0:
	case 1:
		ev.Data = p.data[0]
	default:
		ev.Data = bytes.Join(p.data, []byte("\n"))
	}
	clear(p.data)
	clear(p.other)
	p.raw, p.data, p.other = nil, p.data[:0], p.other[:0]
	return ev
}

// eventSize guesses the size of the event that starts b, to hold it in
// one allocation: up to its first blank line, or all of b (at most 4 KiB
// and max) when b holds none; an event beyond the guess grows as needed.
func eventSize(b []byte, max int) int {
	n := min(len(b), 4<<10)
	if i := bytes.Index(b, []byte("\n\n")); i >= 0 {
		n = i + 2
	} else if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 {
		n = i + 4
	}
	if max > 0 {
		n = min(n, max)
	}
	return n
}

// end returns the event the stream's end completes: a trailing event
// without its blank line, or nil.
func (p *eventParser) end() *Event {
	if len(p.cur) > 0 {
		p.add(p.cur)
		p.cur = nil
	}
	if len(p.raw) == 0 {
		return nil
	}
	return p.finish()
}

// EventReader splits an event stream into events, each bounded by a
// limit. Its 16 KiB read buffer and its parser's arrays come from a pool:
// Close returns them. Not safe for concurrent use.
type EventReader struct {
	br *bufio.Reader
	p  eventParser
	st *readerState // nil once closed
}

// readerState is what an EventReader takes from the pool.
type readerState struct {
	br          *bufio.Reader
	data, other [][]byte
}

var readers = sync.Pool{New: func() any { return &readerState{br: bufio.NewReaderSize(nil, 16<<10)} }}

// NewEventReader reads events from r, each at most max bytes (0 for no
// bound).
func NewEventReader(r io.Reader, max int) *EventReader {
	st := readers.Get().(*readerState)
	st.br.Reset(r)
	return &EventReader{br: st.br, p: eventParser{max: max, data: st.data, other: st.other}, st: st}
}

// Next returns the next event; io.EOF at the end of the stream (a
// trailing event without its blank line is returned first).
func (er *EventReader) Next() (*Event, error) {
	for {
		buf, err := er.br.Peek(max(er.br.Buffered(), 1))
		if len(buf) > 0 {
			buf, _ = er.br.Peek(er.br.Buffered()) // all a fill brought, not its first byte
			n, ev, ferr := er.p.feed(buf)
			_, _ = er.br.Discard(n)
			if ferr != nil {
				return nil, ferr
			}
			if ev != nil {
				return ev, nil
			}
			continue
		}
		if err == io.EOF {
			if ev := er.p.end(); ev != nil {
				return ev, nil
			}
		}
		return nil, err
	}
}

// Close returns the read buffer to the pool; the reader is unusable
// afterwards. Events it returned stay valid.
func (er *EventReader) Close() {
	st := er.st
	if st == nil {
		return
	}
	st.br.Reset(nil)
	st.data = clearLines(er.p.data)
	st.other = clearLines(er.p.other)
	readers.Put(st)
	er.st, er.br, er.p = nil, nil, eventParser{}
}

// clearLines empties lines for the pool, dropping what it points to.
func clearLines(lines [][]byte) [][]byte {
	clear(lines[:cap(lines)])
	return lines[:0]
}

// EventSplitter cuts an event stream written in pieces (an SDK's Write
// calls) into events, holding an event until its end arrives. The zero
// value is ready and unbounded. Not safe for concurrent use.
type EventSplitter struct {
	p eventParser
}

// Idle reports whether the splitter holds nothing: the bytes written so
// far end at an event's end.
func (s *EventSplitter) Idle() bool { return s.p.idle() }

// Split feeds b and calls yield for each event it completes.
func (s *EventSplitter) Split(b []byte, yield func(*Event)) {
	for len(b) > 0 {
		n, ev, _ := s.p.feed(b) // unbounded: no error
		b = b[n:]
		if ev != nil {
			yield(ev)
		}
	}
}

// Held returns the bytes of an event whose end has not arrived, and
// forgets them: what a writer sends as is when the stream ends.
func (s *EventSplitter) Held() []byte {
	out := append(s.p.raw, s.p.cur...)
	s.p = eventParser{max: s.p.max}
	return out
}

// AppendEvent appends one event to dst: the other field lines as given,
// then data, one data line per line of it. data is JSON (a message, as
// received or rewritten), so a CR or LF in it is whitespace between
// tokens: a lone CR, which ends a line for an event-stream parser,
// becomes a space.
func AppendEvent(dst []byte, other [][]byte, data []byte) []byte {
	n := len(data) + (bytes.Count(data, []byte("\n"))+1)*len("data: \n") + 1
	for _, l := range other {
		n += len(l) + 1
	}
	dst = slices.Grow(dst, n)
	for _, l := range other {
		dst = append(dst, l...)
		dst = append(dst, '\n')
	}
	for rest, more := data, true; more; {
		var l []byte
		l, rest, more = bytes.Cut(rest, []byte("\n"))
		dst = append(dst, "data: "...)
		for {
			i := bytes.IndexByte(l, '\r')
			if i < 0 {
				break
			}
			dst = append(append(dst, l[:i]...), ' ')
			l = l[i+1:]
		}
		dst = append(dst, l...)
		dst = append(dst, '\n')
	}
	return append(dst, '\n')
}
