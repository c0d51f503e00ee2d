package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// event is one server-sent event as read from the upstream: its bytes as
// received (terminating blank line included), its data (data lines joined
// with "\n") and its other field lines (id, event, retry, comments).
type event struct {
	raw   []byte
	data  []byte
	other [][]byte
}

var errEventTooLarge = errors.New("server-sent event exceeds the held-message limit")

// eventReader splits an event stream into events. Lines end in "\n",
// "\r\n" or "\r" alone, as the event-stream grammar (and so the client)
// has them. One event is bounded by max bytes.
type eventReader struct {
	br     *bufio.Reader
	max    int64
	skipLF bool // the last line ended in a CR: an LF right after it belongs to it
}

func newEventReader(r io.Reader, max int64) *eventReader {
	return &eventReader{br: bufio.NewReaderSize(r, 16<<10), max: max}
}

// next returns the next event; io.EOF at the end of the stream (a
// trailing event without its blank line is returned first).
func (er *eventReader) next() (*event, error) {
	ev := &event{}
	var data [][]byte
	for {
		line, err := er.line(int64(len(ev.raw)))
		if len(line) > 0 {
			ev.raw = append(ev.raw, line...)
		}
		body := bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) > 0 && len(body) == 0: // blank line: end of event
			if len(ev.raw) == len(line) {
				ev.raw = ev.raw[:0] // a stray blank line; keep reading
				if err != nil {
					return nil, err
				}
				continue
			}
			ev.data = bytes.Join(data, []byte("\n"))
			return ev, nil
		case bytes.HasPrefix(body, []byte("data:")):
			v := body[len("data:"):]
			v = bytes.TrimPrefix(v, []byte(" "))
			data = append(data, v)
		case len(body) > 0:
			ev.other = append(ev.other, body)
		}
		if err != nil {
			if err == io.EOF && len(ev.raw) > 0 {
				ev.data = bytes.Join(data, []byte("\n"))
				return ev, nil
			}
			return nil, err
		}
	}
}

// line reads one line, its end (LF, CRLF or a lone CR) included, refusing
// to grow the event past the limit. It never waits for the byte after a
// CR: an LF arriving later is dropped as the end of that line.
func (er *eventReader) line(have int64) ([]byte, error) {
	var out []byte
	for {
		buf, err := er.br.Peek(max(er.br.Buffered(), 1))
		if len(buf) == 0 {
			return out, err
		}
		if er.skipLF {
			er.skipLF = false
			if buf[0] == '\n' {
				_, _ = er.br.Discard(1)
				continue
			}
		}
		n, end := len(buf), false
		if i := bytes.IndexAny(buf, "\r\n"); i >= 0 {
			n, end = i+1, true
			if buf[i] == '\r' {
				if i+1 < len(buf) {
					if buf[i+1] == '\n' {
						n++
					}
				} else {
					er.skipLF = true
				}
			}
		}
		if have+int64(len(out)+n) > er.max {
			return nil, errEventTooLarge
		}
		out = append(out, buf[:n]...)
		_, _ = er.br.Discard(n)
		if end {
			return out, nil
		}
	}
}

// relaySSE relays the upstream's per-request event stream frame by frame,
// flushing each, and rewrites only the final response. It returns what
// settles the reservation (see forward): the stream is the upstream's
// answer, so only a final JSON-RPC error releases it; a stream that breaks
// or ends before the response, or a client that hangs up, leaves it spent.
func (h *Handler) relaySSE(ctx context.Context, w http.ResponseWriter, resp *http.Response, c *call) error {
	rc := http.NewResponseController(w)
	copyHeader(w.Header(), resp.Header)
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(resp.StatusCode)
	_ = rc.Flush()
	er := newEventReader(resp.Body, h.maxHeld)
	var release error
	final := false
	for {
		ev, err := er.next()
		if err != nil {
			if !final {
				if errors.Is(err, io.EOF) {
					err = errNoResponse
				}
				h.log.ErrorContext(ctx, "proxy: upstream failed", "method", c.req.method, "target", mcpwire.Shown(c.target),
					"upstream", h.up.Redacted(), "step", "read the upstream event stream", "sent", true, "error", err)
				writeEvent(w, nil, errorBody(c.req.id, mrtr.CodeInternalError, msgFailedAfterSend, nil))
				_ = rc.Flush()
			}
			return release
		}
		if !final && len(ev.data) > 0 {
			if msg, err := mcpwire.ParseObject(ev.data); err == nil && isResponse(msg) {
				out, _, r := h.finish(ctx, c, ev.data)
				release, final = r, true
				writeEvent(w, ev.other, out)
				_ = rc.Flush()
				continue
			}
		}
		if _, err := w.Write(ev.raw); err != nil {
			return release // the client hung up; the upstream has the call
		}
		if !bytes.HasSuffix(ev.raw, []byte("\n\n")) && !bytes.HasSuffix(ev.raw, []byte("\r\n\r\n")) {
			_, _ = w.Write([]byte("\n\n"))
		}
		_ = rc.Flush()
	}
}

// writeEvent writes one event: the other field lines as received, then
// data, one data line per line of it. data is valid JSON (the upstream's
// response, as received or rewritten, or the proxy's own), so a CR or LF
// in it is whitespace between tokens: a lone CR, which ends a line for an
// event-stream parser, becomes a space.
func writeEvent(w io.Writer, other [][]byte, data []byte) {
	var buf bytes.Buffer
	for _, l := range other {
		buf.Write(l)
		buf.WriteByte('\n')
	}
	for l := range bytes.SplitSeq(data, []byte("\n")) {
		buf.WriteString("data: ")
		for _, c := range l {
			if c == '\r' {
				c = ' '
			}
			buf.WriteByte(c)
		}
		buf.WriteByte('\n')
	}
	buf.WriteByte('\n')
	_, _ = w.Write(buf.Bytes())
}
