package mcpwire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func readAll(t *testing.T, r io.Reader, max int) (evs []*Event, err error) {
	t.Helper()
	er := NewEventReader(r, max)
	defer er.Close()
	for {
		ev, err := er.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return evs, err
		}
		evs = append(evs, ev)
	}
}

// The grammar's line ends (LF, CRLF, a lone CR) and multi-line data.
func TestEventReader(t *testing.T) {
	in := "event: message\r\nid: 1\r\ndata: {\"a\":\rdata: 1}\r\r\n: c\n\n\n\ndata: x"
	for name, r := range map[string]io.Reader{
		"whole":     bytes.NewReader([]byte(in)),
		"byte-wise": iotest.OneByteReader(bytes.NewReader([]byte(in))),
	} {
		evs, err := readAll(t, r, 0)
		if err != nil || len(evs) != 3 {
			t.Fatalf("%s: %d events, %v", name, len(evs), err)
		}
		if string(evs[0].Data) != "{\"a\":\n1}" || len(evs[0].Other) != 2 || string(evs[0].Other[1]) != "id: 1" {
			t.Errorf("%s: event 1 %q %q", name, evs[0].Data, evs[0].Other)
		}
		if string(evs[1].Raw) != ": c\n\n" || evs[1].Data != nil {
			t.Errorf("%s: event 2 %q", name, evs[1].Raw)
		}
		if string(evs[2].Data) != "x" {
			t.Errorf("%s: trailing event %q", name, evs[2].Raw)
		}
	}
	if _, err := readAll(t, bytes.NewReader([]byte("data: 0123456789\n\n")), 8); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("past the limit: %v", err)
	}
}

// What AppendEvent writes, the reader reads back: data as given (a lone
// CR, JSON whitespace, as a space), other lines kept.
func TestAppendEventRoundTrip(t *testing.T) {
	data := []byte("{\"a\":\r\n 1,\r\"b\":\n2}")
	b := AppendEvent(nil, [][]byte{[]byte("id: 7")}, data)
	evs, err := readAll(t, bytes.NewReader(b), 0)
	if err != nil || len(evs) != 1 || string(evs[0].Data) != "{\"a\": \n 1, \"b\":\n2}" || string(evs[0].Other[0]) != "id: 7" {
		t.Fatalf("round trip of %q: %d events, %v", b, len(evs), err)
	}
}

// FuzzEventReader: an untrusted event stream never panics the reader, no
// event exceeds the limit, each event's raw bytes are a contiguous piece
// of the stream (what is relayed is what was received), and a splitter
// fed the stream in pieces cuts the same events.
func FuzzEventReader(f *testing.F) {
	f.Add([]byte("event: message\nid: 1\ndata: {}\n\n"), 64, uint8(3))
	f.Add([]byte("data: a\ndata: b\r\n\r\n: comment\n\ndata"), 8, uint8(1))
	f.Add([]byte("\n\n\ndata: x"), 1<<20, uint8(2))
	f.Add([]byte("data: a\r\r\ndata: b\r\r"), 1<<20, uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, max int, piece uint8) {
		if max <= 0 || max > 1<<20 {
			max = 1 << 10
		}
		evs, err := readAll(t, bytes.NewReader(b), max)
		if err != nil && !errors.Is(err, ErrEventTooLarge) {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if len(ev.Raw) > max {
				t.Fatalf("event of %d bytes past the limit %d", len(ev.Raw), max)
			}
			if !bytes.Contains(b, ev.Raw) {
				t.Fatalf("event %q is not a piece of the stream %q", ev.Raw, b)
			}
		}
		if err != nil {
			return
		}
		var s EventSplitter
		var got []*Event
		n := int(piece%16) + 1
		for rest := b; len(rest) > 0; {
			k := min(n, len(rest))
			s.Split(rest[:k], func(ev *Event) { got = append(got, ev) })
			rest = rest[k:]
		}
		if tail := s.Held(); len(tail) > 0 {
			tr, _ := readAll(t, bytes.NewReader(tail), 0)
			got = append(got, tr...)
		}
		if len(got) != len(evs) {
			t.Fatalf("splitter: %d events, reader %d", len(got), len(evs))
		}
		for i := range got {
			// Raw may differ by the LF of a CRLF cut between two pieces:
			// after a CR the parser never waits, and drops that LF.
			if !bytes.Equal(got[i].Data, evs[i].Data) || !bytes.Equal(bytes.Join(got[i].Other, nil), bytes.Join(evs[i].Other, nil)) {
				t.Fatalf("event %d: splitter %q, reader %q", i, got[i].Raw, evs[i].Raw)
			}
		}
	})
}

func TestIsEventStream(t *testing.T) {
	for ct, want := range map[string]bool{
		"text/event-stream": true, "Text/Event-Stream; charset=utf-8": true, " text/event-stream ": true,
		"application/json": false, "text/event-streamx": false, "": false, "text/event": false,
	} {
		if got := IsEventStream(ct); got != want {
			t.Errorf("IsEventStream(%q) = %v, want %v", ct, got, want)
		}
	}
}

// TestEventReaderReuse: the reader reuses its arrays from event to event
// and from reader to reader (a pool), and an event it returned stays as
// it was after the next event and after Close.
func TestEventReaderReuse(t *testing.T) {
	stream := "event: a\nid: 1\n: c\ndata: x\ndata: y\n\nevent: b\nid: 2\ndata: z\n\n"
	er := NewEventReader(strings.NewReader(stream), 0)
	first, err := er.Next()
	if err != nil {
		t.Fatal(err)
	}
	second, err := er.Next()
	if err != nil {
		t.Fatal(err)
	}
	er.Close()
	er = NewEventReader(strings.NewReader("event: c\nid: 3\nretry: 1\nx: 1\ndata: w\n\n"), 0)
	if _, err := er.Next(); err != nil {
		t.Fatal(err)
	}
	er.Close()
	if got := string(bytes.Join(first.Other, []byte("|"))) + " " + string(first.Data); got != "event: a|id: 1|: c x\ny" {
		t.Errorf("first event became %q", got)
	}
	if got := string(bytes.Join(second.Other, []byte("|"))) + " " + string(second.Data); got != "event: b|id: 2 z" {
		t.Errorf("second event became %q", got)
	}
	if !raceEnabled { // the race detector drops pooled items at random
		ev := []byte("event: message\nid: 1_0\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")
		src := bytes.NewReader(ev)
		n := testing.AllocsPerRun(100, func() {
			src.Reset(ev)
			er := NewEventReader(src, 1<<20)
			_, _ = er.Next()
			er.Close()
		})
		if n > 3 { // the reader, the event, its bytes
			t.Errorf("%v allocations to read one event", n)
		}
		n = testing.AllocsPerRun(100, func() { _ = AppendEvent(nil, [][]byte{[]byte("id: 1")}, []byte("{\"a\":\n1}")) })
		if n != 1 {
			t.Errorf("%v allocations to write one event", n)
		}
	}
}
