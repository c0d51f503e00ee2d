package audit

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"errors"
	"fmt"
	"io"

	"github.com/mrtr-go/mrtr/reqstate"
)

// Problem is what is wrong with the first bad line of a trail.
type Problem string

// The problems Verify reports.
const (
	// ProblemAltered: the line's MAC does not hold (its bytes changed).
	ProblemAltered Problem = "altered"
	// ProblemBrokenLink: the line's prev is not the link to the line
	// before it: a line was deleted or inserted before it (or, on line 1,
	// the trail does not start a chain: see VerifyOptions.After).
	ProblemBrokenLink Problem = "broken link"
	// ProblemTruncated: the trail ends inside a line (no newline), or a
	// line is torn (a write cut short, ended by the next one).
	ProblemTruncated Problem = "truncated"
	// ProblemUnknownKey: the line names a kid the ring does not have.
	ProblemUnknownKey Problem = "unknown key"
)

// LineError names the first bad line of a trail.
type LineError struct {
	Line    int // 1-based
	Problem Problem
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Problem) }

// VerifyOptions are the options of Verify; the zero value checks a trail
// from the start of its chain.
type VerifyOptions struct {
	// After is the link the first line must carry: "" for a trail that
	// starts a chain (the first file a Writer ever wrote), or the Result.
	// Last of the trail before it (the file logrotate moved away).
	After string
	// Continued accepts whatever link the first line carries: for a
	// rotated file checked without the one before it. Lines deleted from
	// its start are then not detected.
	Continued bool
}

// Result is what Verify read.
type Result struct {
	Lines int    // lines checked and good
	First string // the first line's prev
	Last  string // the link to the last good line: After for the next trail
}

// Verify reads a trail and checks every line: its form (ParseLine), its
// MAC under the key its kid names in ring, and its link to the line
// before it. It returns a *LineError for the first bad line, an error of
// r, or nil when every line holds. An empty trail holds. A nil ring is a
// programmer error and panics.
func Verify(r io.Reader, ring *reqstate.KeyRing, opts *VerifyOptions) (Result, error) {
	var o VerifyOptions
	if opts != nil {
		o = *opts
	}
	keys := make(map[string]*macs)
	for _, k := range ring.Keys() {
		keys[k.ID] = newMacs(derive(k))
	}
	res := Result{Last: o.After}
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for n := 1; ; n++ {
		var err error
		line, err = readLine(br, line[:0])
		if err == io.EOF && len(line) == 0 {
			return res, nil
		}
		bad := func(p Problem) (Result, error) { return res, &LineError{Line: n, Problem: p} }
		switch {
		case errors.Is(err, errLong):
			return bad(ProblemAltered)
		case err == io.EOF:
			return bad(ProblemTruncated) // no newline: the tail was cut
		case err != nil:
			return res, err
		}
		l, perr := ParseLine(line)
		if perr != nil {
			if torn(line) {
				return bad(ProblemTruncated)
			}
			return bad(ProblemAltered)
		}
		m := keys[l.KeyID]
		if m == nil {
			return bad(ProblemUnknownKey)
		}
		want := m.lineMAC(nil, l.raw[:l.macStart])
		if !hmac.Equal(want, []byte(l.MAC)) {
			return bad(ProblemAltered)
		}
		if n == 1 {
			res.First = l.Prev
		}
		if l.Prev != res.Last && !(n == 1 && o.Continued) {
			return bad(ProblemBrokenLink)
		}
		res.Lines, res.Last = n, linkOf(line)
	}
}

var errLong = errors.New("audit: line longer than MaxLineBytes")

// readLine reads one line into dst, without its newline; io.EOF with a
// non-empty line means the last line has no newline.
func readLine(br *bufio.Reader, dst []byte) ([]byte, error) {
	for {
		chunk, err := br.ReadSlice('\n')
		dst = append(dst, chunk...)
		if len(dst) > MaxLineBytes+1 {
			return dst, errLong
		}
		switch {
		case err == nil:
			return dst[:len(dst)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		}
		return dst, err
	}
}

// torn reports whether line looks like the start of a line a write cut
// short: the schema's opening bytes, and no closing brace.
func torn(line []byte) bool {
	return bytes.HasPrefix(line, []byte(`{"schema":`)) && !bytes.HasSuffix(line, []byte(`"}`))
}
