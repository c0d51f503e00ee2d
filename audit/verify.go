package audit

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/mrtr-go/mrtr/reqstate"
)

// Problem is what is wrong with a bad line of a trail.
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
	// line is torn (a write cut short, ended by the next one, which links
	// to its bytes: Verify checks the lines after it).
	ProblemTruncated Problem = "truncated"
	// ProblemUnknownKey: the line names a kid the ring does not have.
	ProblemUnknownKey Problem = "unknown key"
)

// LineError names a bad line of a trail: the first one that is not torn,
// or else the first torn one (Result.Torn lists them all).
type LineError struct {
	Line    int // 1-based
	Problem Problem
	// KeyID is, for ProblemUnknownKey, the kid the line names.
	KeyID string
}

func (e *LineError) Error() string {
	if e.Problem == ProblemUnknownKey {
		kid := e.KeyID
		if len(kid) > 64 { // read from the file: bounded, and quoted below
			kid = kid[:64] + "..."
		}
		return fmt.Sprintf("line %d: %s %s", e.Line, e.Problem, strconv.Quote(kid))
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Problem)
}

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
	Last  string // the link to the last line: After for the next trail
	// Torn lists the torn lines (1-based): writes cut short, each ended
	// by the next line, which links to its bytes, so the lines after it
	// are checked too; and the last line when the trail ends inside it.
	Torn []int
	// Cut reports that the trail ends inside its last line (no newline):
	// the last of Torn.
	Cut bool
	// LastTime and LastEvent are the time and event of the last good
	// line: what to compare with when the tail matters (cutting whole
	// lines off the end of a trail cannot be seen from the trail).
	LastTime  time.Time
	LastEvent string
}

// Verify reads a trail and checks every line: its form (ParseLine), its
// MAC under the key its kid names in ring, and its link to the line
// before it. A torn line (a write cut short, ended by the next one) is
// reported and passed over: the line after it must link to its bytes, as
// the Writer writes it, and every line after it is checked. It returns a
// *LineError for the first bad line that is not torn, else for the first
// torn one; an error of r; or nil when every line holds. An empty trail
// holds. A nil ring is a programmer error and panics.
//
// Lines deleted just before a torn line are not seen when the tear cut
// off the torn line's own prev.
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
			if len(res.Torn) > 0 {
				return res, &LineError{Line: res.Torn[0], Problem: ProblemTruncated}
			}
			return res, nil
		}
		bad := func(p Problem) (Result, error) { return res, &LineError{Line: n, Problem: p} }
		switch {
		case errors.Is(err, errLong):
			return bad(ProblemAltered)
		case err == io.EOF: // no newline: the tail was cut
			res.Torn, res.Cut = append(res.Torn, n), true
			return res, &LineError{Line: res.Torn[0], Problem: ProblemTruncated}
		case err != nil:
			return res, err
		}
		l, perr := ParseLine(line)
		if perr != nil {
			if !torn(line) {
				return bad(ProblemAltered)
			}
			// Torn: the next line ends it and links to its bytes. Its own
			// link is checked when the tear left it.
			if p, ok := tornPrev(line); ok && p != res.Last && !(n == 1 && o.Continued) {
				return bad(ProblemBrokenLink)
			}
			res.Torn = append(res.Torn, n)
			res.Last = linkOf(line)
			continue
		}
		m := keys[l.KeyID]
		if m == nil {
			return res, &LineError{Line: n, Problem: ProblemUnknownKey, KeyID: l.KeyID}
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
		res.Lines++
		res.Last, res.LastTime, res.LastEvent = linkOf(line), l.Time, l.Event
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

// tornPrev returns the prev of a torn line when the tear left it whole.
// The first `,"prev":"` is the member: inside a JSON string every quote
// is escaped.
func tornPrev(line []byte) (string, bool) {
	const key = `,"prev":"`
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return "", false
	}
	v := line[i+len(key):]
	j := bytes.IndexByte(v, '"')
	if j < 0 {
		return "", false // cut inside it
	}
	return string(v[:j]), true
}
