package audit

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"sort"
	"time"
)

// The problems VerifySealed reports besides those of Verify.
const (
	// ProblemSignature: a checkpoint, or a certification it carries, is
	// not signed by the key the chain certifies for it: another node's
	// key, another key file, or another epoch's key.
	ProblemSignature Problem = "bad signature"
	// ProblemSequence: a checkpoint's sequence is not the one after the
	// checkpoint before it, or it does not chain to it (prev).
	ProblemSequence Problem = "checkpoint out of sequence"
	// ProblemCount: a checkpoint's count or head is not the trail's: lines
	// vanished or were added before it.
	ProblemCount Problem = "count does not match"
	// ProblemTime: a line's time goes back.
	ProblemTime Problem = "time goes back"
	// ProblemEpoch: lines or a checkpoint lie before the epoch of the key
	// that seals them (a later key re-sealing older lines: the class of
	// journald's CVE-2023-31439), or a checkpoint that carries
	// certifications seals lines.
	ProblemEpoch Problem = "sealed by a later epoch's key"
	// ProblemNode: the line names another node than the trail's.
	ProblemNode Problem = "another node"
	// ProblemAbandoned: a restart record abandons other lines than those
	// after the checkpoint before it.
	ProblemAbandoned Problem = "restart abandons other lines"
	// ProblemFork: another checkpoint, validly signed, has the same node
	// and sequence (in a checkpoint log).
	ProblemFork Problem = "two checkpoints for one sequence"
	// ProblemEndsEarly: a checkpoint log shows a checkpoint, validly
	// signed, after the trail's last one: lines were cut from the end.
	ProblemEndsEarly Problem = "ends before a checkpoint the log shows"
	// ProblemNotStart: the trail does not begin its chain (a rotated file
	// without the files before it).
	ProblemNotStart Problem = "does not begin the chain"
)

// Verdict is what VerifySealed concludes.
type Verdict int

// The verdicts, with the exit codes of mrtr audit verify.
const (
	// VerdictOK: every line is sealed up to the newest checkpoint, which
	// is final (a clean stop), and nothing was torn or abandoned. Exit 0.
	VerdictOK Verdict = iota
	// VerdictBroken: a line was altered, deleted, inserted or reordered,
	// the trail is another node's or under another key, it ends before a
	// checkpoint a log shows, or lines vanish without a restart record.
	// SealResult.Err names the first bad line. Exit 1.
	VerdictBroken
	// VerdictUnsealed: the trail holds, but lines after its newest
	// checkpoint are unsealed, lines were abandoned by a restart record
	// (a crash), lines are torn, or it does not end in a final
	// checkpoint. Exit 3.
	VerdictUnsealed
)

// String names the verdict.
func (v Verdict) String() string {
	switch v {
	case VerdictOK:
		return "sealed"
	case VerdictBroken:
		return "broken"
	case VerdictUnsealed:
		return "unsealed"
	}
	return "unknown"
}

// ExitCode returns mrtr audit verify's exit code for the verdict: 0, 1
// or 3.
func (v Verdict) ExitCode() int {
	switch v {
	case VerdictOK:
		return 0
	case VerdictBroken:
		return 1
	}
	return 3
}

// Pos is where a line is: the index of its trail in the list given to
// VerifySealed (0 for the first) and its line in that trail (1-based).
type Pos struct {
	File int
	Line int
}

// SealError names a bad line of a trail, or a checkpoint log's record
// the trail contradicts.
type SealError struct {
	Pos     Pos    // the line; for ProblemEndsEarly, just after the trail's last
	Line    uint64 // its number in the whole chain, every file (1-based)
	Problem Problem
	Detail  string // in words: numbers and names, never a line's content
}

func (e *SealError) Error() string {
	s := fmt.Sprintf("file %d line %d (line %d of the chain): %s", e.Pos.File+1, e.Pos.Line, e.Line, e.Problem)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// SealOptions are the options of VerifySealed; the zero value checks one
// node's trail from its first line with no checkpoint log.
type SealOptions struct {
	// Node is the node the trail must be; "" takes the node of its first
	// checkpoint, and every other checkpoint must name the same.
	Node string
	// Checkpoints are the checkpoints a log carried off the host
	// (ReadCheckpoints), of any node: those of the trail's node are
	// compared with it.
	Checkpoints []Checkpoint
	// Continued accepts a first trail that begins mid-chain (a rotated
	// file whose predecessors are gone): its first line may carry any
	// link, and its first checkpoint is anchored by the log's checkpoints
	// before it, which must chain from sequence 1 under the key. The
	// lines before that checkpoint in the file are checked by it alone,
	// and lines cut from the file's start before it are not seen (they
	// cannot be told from lines in the file before it).
	Continued bool
}

// SealResult is what VerifySealed read and concludes.
type SealResult struct {
	Verdict Verdict
	Node    string
	// Lines is the number of lines read, every file.
	Lines uint64
	// Last is the trail's newest checkpoint (nil without one); it seals
	// Last.Count lines (the ones before it), less those Abandoned.
	Last *Checkpoint
	// Unsealed is the number of lines after Last.
	Unsealed uint64
	// Abandoned is the number of lines restart records abandoned, and
	// Restarts the number of those records.
	Abandoned uint64
	Restarts  int
	// Torn lists the torn lines: writes cut short (every line after them
	// was checked), and, when Cut, the last line, which has no newline.
	Torn []Pos
	Cut  bool
	// FirstEpoch is the epoch of the first checkpoint: more than 0 for a
	// trail begun with an evolved key, which says nothing of what the node
	// wrote before that epoch began.
	FirstEpoch uint64
	// LogMatched is the number of the log's checkpoints of this node that
	// the trail holds; LogIgnored those of this node that are not validly
	// signed (a log holds anything anyone wrote to it).
	LogMatched int
	LogIgnored int
	// Err names the first bad line (VerdictBroken).
	Err *SealError
}

// epochKey is a key of the chain and when its epoch began.
type epochKey struct {
	pub   PublicKey
	since time.Time
}

// sealState is VerifySealed's state between lines.
type sealState struct {
	opts  SealOptions
	res   SealResult
	keys  []epochKey // by epoch, as certified so far
	g     uint64     // the line's number in the chain
	pos   Pos
	prev  string // the link to the line before
	last  time.Time
	cp    *Checkpoint // the last checkpoint
	cpLnk string      // the link to its line
	cpAt  map[uint64]seen

	certLines uint64 // the certs lines that open the trail
	off       uint64 // lines of the chain before the first file (Continued)
	firstSeq  uint64 // the trail's first checkpoint's sequence

	// The lines after the last checkpoint.
	pending uint64
	hash    hash.Hash
	first   time.Time // the time of the first of them that has one
	hasTime bool
}

// seen is a checkpoint of the trail, for the log's.
type seen struct {
	hash string
	pos  Pos
	line uint64
}

// VerifySealed checks the trails, one chain oldest first (after
// logrotate: audit.jsonl.1, audit.jsonl), with the public key of the
// node's FILE.pub (or the ring-derived key), and no secret:
//
//   - every line links to the one before it; a torn line is named and
//     the lines after it are checked;
//   - checkpoint n is signed by the key checkpoint n-1 certified
//     (FILE.pub's for the first, or the key its certifications lead to),
//     its sequence is n, it chains to n-1 by hash, and its count and
//     head are the trail's;
//   - times never go back, and no line or checkpoint lies before the
//     epoch of the key that seals it (a later key cannot re-seal older
//     lines);
//   - a restart record abandons exactly the lines after the checkpoint
//     before it;
//   - every checkpoint of a log (opts.Checkpoints) of the trail's node,
//     validly signed, is the trail's checkpoint of the same sequence;
//     one after the trail's last means lines were cut from its end.
//
// It stops at the first bad line, which SealResult.Err names, and reads
// on past torn lines, which it lists; the error is a trail's read error
// only.
func VerifySealed(key PublicKey, trails []io.Reader, opts *SealOptions) (SealResult, error) {
	s := &sealState{keys: []epochKey{{pub: key}}, hash: sha256.New(), cpAt: map[uint64]seen{}}
	if opts != nil {
		s.opts = *opts
	}
	s.res.Node = s.opts.Node
	var line []byte
	for fi, r := range trails {
		br := bufio.NewReaderSize(r, 64<<10)
		s.pos = Pos{File: fi}
		for {
			var err error
			line, err = readLine(br, line[:0])
			if err == io.EOF && len(line) == 0 {
				break
			}
			if err != nil && err != io.EOF && !errors.Is(err, errLong) {
				return s.res, err
			}
			s.g++
			s.pos.Line++
			if errors.Is(err, errLong) {
				s.bad(ProblemAltered, "longer than MaxLineBytes")
				return s.end(), nil
			}
			if err == io.EOF { // the file ends inside this line
				s.res.Torn = append(s.res.Torn, s.pos)
				s.res.Cut = fi == len(trails)-1
				s.pend(line, nil)
				s.prev = linkOf(line)
				break
			}
			if !s.line(line) {
				return s.end(), nil
			}
		}
	}
	s.logs()
	return s.end(), nil
}

// bad records the first bad line.
func (s *sealState) bad(p Problem, detail string, args ...any) {
	if s.res.Err == nil {
		s.res.Err = &SealError{Pos: s.pos, Line: s.g + s.off, Problem: p, Detail: fmt.Sprintf(detail, args...)}
	}
}

// pend adds a line to those after the last checkpoint.
func (s *sealState) pend(line []byte, l *Line) {
	s.pending++
	s.hash.Write(line)
	s.hash.Write([]byte{'\n'})
	if l != nil && !s.hasTime {
		s.first, s.hasTime = l.Time, true
	}
}

// line checks one line; false stops at a bad one.
func (s *sealState) line(b []byte) bool {
	l, err := ParseLine(b)
	if err != nil {
		if !torn(b) {
			s.bad(ProblemAltered, "not a line of the trail")
			return false
		}
		if p, ok := tornPrev(b); ok && s.g == 1 && s.opts.Continued {
			s.prev = p
		} else if ok && p != s.prev && p != s.cpLnk {
			s.bad(ProblemBrokenLink, "a torn line that does not link to the line before it")
			return false
		}
		s.res.Torn = append(s.res.Torn, s.pos)
		s.pend(b, nil)
		s.prev = linkOf(b)
		return true
	}
	// One text per line: what verifies is byte for byte what a Writer
	// writes (no member added, reordered, renamed or re-escaped).
	canon := appendBody(nil, l)
	canon = append(canon, `,"prev":"`...)
	canon = append(canon, l.Prev...)
	canon = append(canon, `","kid":`...)
	canon = appendString(canon, l.KeyID)
	if !bytes.Equal(canon, b[:l.macStart]) {
		s.bad(ProblemAltered, "not in the form a Writer writes")
		return false
	}
	if s.g == 1 && s.opts.Continued {
		s.prev = l.Prev // mid-chain: the first checkpoint vouches for it
	}
	if s.res.Node != "" && l.Node != "" && l.Node != s.res.Node {
		s.bad(ProblemNode, "node %q, the trail's is %q", clip(l.Node), clip(s.res.Node))
		return false
	}
	if l.Time.Before(s.last) {
		s.bad(ProblemTime, "%s, after a line of %s", l.Time.Format(time.RFC3339Nano), s.last.Format(time.RFC3339Nano))
		return false
	}
	if l.Event == EventCerts {
		// The opening of a trail begun with a key of a late epoch: only
		// certs lines before them, and no checkpoint yet.
		if s.cp != nil || s.pending != s.certLines || l.Prev != s.prev {
			s.bad(ProblemEpoch, "certifications that do not open the trail")
			return false
		}
		for i := range l.Certs {
			if !s.certify(&l.Certs[i], uint64(len(s.keys)-1), l.Time) {
				return false
			}
		}
		s.certLines++
	}
	if l.Checkpoint == nil {
		if l.Prev != s.prev {
			s.bad(ProblemBrokenLink, "a line was deleted or inserted before it")
			return false
		}
		s.pend(b, l)
		s.last, s.prev = l.Time, linkOf(b)
		return true
	}
	if !s.checkpoint(l) {
		return false
	}
	s.cpLnk = linkOf(b)
	s.prev, s.last = s.cpLnk, l.Time
	return true
}

// checkpoint checks a checkpoint line.
func (s *sealState) checkpoint(l *Line) bool {
	c := l.Checkpoint
	if c.Node != l.Node || !c.Time.Equal(l.Time) {
		s.bad(ProblemAltered, "the checkpoint's node or time is not its line's")
		return false
	}
	if s.res.Node == "" {
		s.res.Node = c.Node
	} else if c.Node != s.res.Node {
		s.bad(ProblemNode, "checkpoint of node %q, the trail's is %q", clip(c.Node), clip(s.res.Node))
		return false
	}
	if s.cp == nil {
		s.firstSeq = c.Seq
		if c.Seq > 1 && s.opts.Continued && !s.anchor(c) {
			s.bad(ProblemNotStart, "its first checkpoint is sequence %d, and the log does not chain to it from sequence 1", c.Seq)
			return false
		}
	}
	var wantSeq uint64 = 1
	wantPrev, wantLink, epoch := "", "", uint64(len(s.keys)-1) // the epoch the opening certs lines reached
	if s.cp != nil {
		wantSeq, wantPrev, wantLink, epoch = s.cp.Seq+1, s.cp.Hash(), s.cpLnk, s.cp.Epoch
		if s.cpLnk == "" && s.firstSeq == c.Seq { // anchored by the log: its line is not here
			wantLink = l.Prev
		}
		if s.cp.Next != nil {
			epoch = s.cp.Next.Epoch
		}
	}
	if c.Seq != wantSeq || c.Prev != wantPrev {
		if s.cp == nil {
			s.bad(ProblemNotStart, "its first checkpoint is sequence %d: give the files before it", c.Seq)
		} else {
			s.bad(ProblemSequence, "sequence %d after %d, or not chained to it", c.Seq, s.cp.Seq)
		}
		return false
	}
	sealed := s.pending // the lines this checkpoint seals, certs lines aside
	if s.cp == nil {
		sealed -= s.certLines
	}
	if c.Abandoned != nil {
		if l.Event != EventRestart || l.Prev != wantLink {
			s.bad(ProblemBrokenLink, "a restart record that does not link to the checkpoint before it")
			return false
		}
		if c.Abandoned.Lines != s.pending || c.Abandoned.Hash != s.sum() {
			s.bad(ProblemAbandoned, "it abandons %d lines, %d follow the checkpoint before it", c.Abandoned.Lines, s.pending)
			return false
		}
		sealed = 0
	} else if l.Event != EventCheckpoint || l.Prev != s.prev {
		s.bad(ProblemBrokenLink, "a line was deleted or inserted before it")
		return false
	}
	if s.cpLnk == "" && s.firstSeq == c.Seq && s.opts.Continued && c.Count >= s.g-1 {
		s.off = c.Count - (s.g - 1) // the lines of the files before
	}
	if c.Count != s.g-1+s.off || c.Head != l.Prev {
		s.bad(ProblemCount, "it counts %d lines before it, the trail holds %d", c.Count, s.g-1+s.off)
		return false
	}
	// The key: the epoch the chain is at, led on by the certifications
	// it carries (only a checkpoint that seals no new line may carry
	// them: a restart, or the first of a trail begun with an evolved key).
	if len(c.Certs) > 0 && sealed > 0 {
		s.bad(ProblemEpoch, "a checkpoint that carries certifications seals %d lines", sealed)
		return false
	}
	if s.cp != nil && len(c.Certs) > 0 {
		// A restart after the key file evolved but before the checkpoint
		// that certified it was written: one certification, made for
		// this very sequence, after the checkpoint before.
		if cc := &c.Certs[0]; len(c.Certs) > 1 || cc.Seq != c.Seq || cc.Since.Before(s.cp.Time) {
			s.bad(ProblemEpoch, "a restart may carry only the certification made for its own sequence")
			return false
		}
	}
	for i := range c.Certs {
		if !s.certify(&c.Certs[i], epoch, c.Time) {
			return false
		}
		epoch++
	}
	if c.Epoch != epoch || !c.checkBy(s.keys[epoch].pub) {
		s.bad(ProblemSignature, "not signed by the key of epoch %d (it says epoch %d)", epoch, c.Epoch)
		return false
	}
	since := s.keys[epoch].since
	if c.Time.Before(since) || (sealed > 0 && s.hasTime && s.first.Before(since)) {
		s.bad(ProblemEpoch, "it seals lines from before its key's epoch %d began at %s", epoch, since.Format(time.RFC3339Nano))
		return false
	}
	if c.Next != nil && (c.Next.Seq != c.Seq || !s.certify(c.Next, epoch, c.Time)) {
		s.bad(ProblemSignature, "a certification of the next epoch not made for this checkpoint")
		return false
	}
	if s.cp == nil {
		s.res.FirstEpoch = c.Epoch
	}
	if c.Abandoned != nil {
		s.res.Abandoned += c.Abandoned.Lines
		s.res.Restarts++
	}
	s.cpAt[c.Seq] = seen{hash: c.Hash(), pos: s.pos, line: s.g + s.off}
	s.cp = c
	s.pending, s.hasTime = 0, false
	s.hash.Reset()
	return true
}

// anchor follows the log's checkpoints of c's node from sequence 1 to
// the one before c, each under the key the ones before it certify, and
// makes the last of them the checkpoint before c (Continued).
func (s *sealState) anchor(c *Checkpoint) bool {
	keys := []epochKey{s.keys[0]}
	var prev *Checkpoint
	for seq := uint64(1); seq < c.Seq; seq++ {
		var next *Checkpoint
		for i := range s.opts.Checkpoints {
			if lc := &s.opts.Checkpoints[i]; lc.Node == c.Node && lc.Seq == seq {
				if k, ok := logStep(keys, prev, lc); ok {
					keys, next = k, lc
					break
				}
			}
		}
		if next == nil {
			return false
		}
		prev = next
	}
	s.keys, s.cp, s.cpLnk = keys, prev, ""
	return true
}

// logStep checks a log's checkpoint c after prev (nil for the first)
// under keys, the chain of epoch keys so far (its last is the current
// epoch's), and returns the chain after c.
func logStep(keys []epochKey, prev *Checkpoint, c *Checkpoint) ([]epochKey, bool) {
	want, prevHash := uint64(1), ""
	if prev != nil {
		want, prevHash = prev.Seq+1, prev.Hash()
	}
	if c.Seq != want || c.Prev != prevHash {
		return nil, false
	}
	keys = append([]epochKey(nil), keys...)
	add := func(ct *Cert) bool {
		e := uint64(len(keys) - 1)
		if ct.Epoch != e+1 || !ct.checkBy(keys[e].pub) || ct.Since.Before(keys[e].since) || ct.Since.After(c.Time) {
			return false
		}
		keys = append(keys, epochKey{pub: ct.Pub, since: ct.Since})
		return true
	}
	for i := range c.Certs {
		if !add(&c.Certs[i]) {
			return nil, false
		}
	}
	e := uint64(len(keys) - 1)
	if c.Epoch != e || !c.checkBy(keys[e].pub) || c.Time.Before(keys[e].since) {
		return nil, false
	}
	if c.Next != nil && !add(c.Next) {
		return nil, false
	}
	return keys, true
}

// certify checks a certification of the epoch after epoch, carried by a
// checkpoint of time at, and adds its key.
func (s *sealState) certify(c *Cert, epoch uint64, at time.Time) bool {
	if c.Epoch != epoch+1 || !c.checkBy(s.keys[epoch].pub) {
		s.bad(ProblemSignature, "a certification of epoch %d not signed by the key of epoch %d", c.Epoch, epoch)
		return false
	}
	if c.Since.Before(s.keys[epoch].since) || c.Since.After(at) {
		s.bad(ProblemEpoch, "epoch %d begins outside the epoch before it and its checkpoint", c.Epoch)
		return false
	}
	if uint64(len(s.keys)) == c.Epoch {
		s.keys = append(s.keys, epochKey{pub: c.Pub, since: c.Since})
	} else if s.keys[c.Epoch].pub != c.Pub {
		s.bad(ProblemSignature, "a second key for epoch %d", c.Epoch)
		return false
	}
	return true
}

func (s *sealState) sum() string {
	if s.pending == 0 {
		return ""
	}
	return sumOf(s.hash)
}

// logs compares the log's checkpoints of the trail's node with the
// trail's.
func (s *sealState) logs() {
	if s.res.Err != nil || s.res.Node == "" {
		return
	}
	var after []*Checkpoint // validly signed, after the trail's last
	for i := range s.opts.Checkpoints {
		c := &s.opts.Checkpoints[i]
		if c.Node != s.res.Node || c.Seq < s.firstSeq { // before the trail: what anchored it (Continued)
			continue
		}
		if t, ok := s.cpAt[c.Seq]; ok {
			if c.Hash() == t.hash {
				s.res.LogMatched++
				continue
			}
			if k := c.Epoch; k < uint64(len(s.keys)) && c.checkBy(s.keys[k].pub) {
				s.res.Err = &SealError{Pos: t.pos, Line: t.line, Problem: ProblemFork,
					Detail: fmt.Sprintf("the log holds another checkpoint %d, validly signed", c.Seq)}
				return
			}
			s.res.LogIgnored++
			continue
		}
		after = append(after, c)
	}
	// Checkpoints after the trail's last: follow the chain of keys the
	// trail certified, and the log's own certifications.
	sort.Slice(after, func(i, j int) bool { return after[i].Seq < after[j].Seq })
	keys := append([]epochKey(nil), s.keys...)
	for _, c := range after {
		ok := false
		epoch := c.Epoch
		if n := uint64(len(c.Certs)); n <= epoch {
			base := epoch - n
			if base < uint64(len(keys)) {
				pub := keys[base].pub
				chain := true
				for i := range c.Certs {
					if c.Certs[i].Epoch != base+uint64(i)+1 || !c.Certs[i].checkBy(pub) {
						chain = false
						break
					}
					pub = c.Certs[i].Pub
				}
				ok = chain && c.checkBy(pub)
			}
		}
		if !ok {
			s.res.LogIgnored++
			continue
		}
		if c.Next != nil && c.Next.Epoch == uint64(len(keys)) && c.Next.checkBy(keys[len(keys)-1].pub) {
			keys = append(keys, epochKey{pub: c.Next.Pub, since: c.Next.Since})
		}
		last := uint64(0)
		if s.cp != nil {
			last = s.cp.Seq
		}
		s.res.Err = &SealError{Pos: Pos{File: max(0, s.pos.File), Line: s.pos.Line + 1}, Line: s.g + 1, Problem: ProblemEndsEarly,
			Detail: fmt.Sprintf("the log shows checkpoint %d (count %d, %s), the trail ends at checkpoint %d after %d lines",
				c.Seq, c.Count, c.Time.Format(time.RFC3339Nano), last, s.g)}
		return
	}
}

// end concludes.
func (s *sealState) end() SealResult {
	r := s.res
	r.Lines, r.Last, r.Unsealed = s.g, s.cp, s.pending
	switch {
	case r.Err != nil:
		r.Verdict = VerdictBroken
	case r.Last == nil || r.Unsealed > 0 || r.Abandoned > 0 || len(r.Torn) > 0 || !r.Last.Final:
		r.Verdict = VerdictUnsealed
	default:
		r.Verdict = VerdictOK
	}
	return r
}

// clip bounds a string read from a trail for an error.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// TrailNode returns the node of the first checkpoint in a trail ("" when
// it has none), unchecked: to group the files of several nodes before
// verifying each node's on its own (VerifySealed).
func TrailNode(r io.Reader) (string, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		var err error
		line, err = readLine(br, line[:0])
		if err == nil && looksLikeCheckpoint(line) {
			if l, perr := ParseLine(line); perr == nil {
				return l.Checkpoint.Node, nil
			}
		}
		switch {
		case err == io.EOF:
			return "", nil
		case err != nil && !errors.Is(err, errLong):
			return "", err
		}
	}
}
