package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/reqstate"
)

// Options configures a Writer. Keys is required; every other zero value
// is a useful default.
type Options struct {
	// Keys returns the current key ring (reqstate.AESGCM.KeyRing, which
	// follows a reload). Each line is MACed under a key derived from the
	// ring's sealing key at the line's time (its primary, without
	// windows), named by the line's kid; the arguments digest uses another
	// key derived from the same one.
	Keys func() *reqstate.KeyRing
	// Node names this process in every line (node); "" leaves it out.
	Node string
	// Upstream names what a proxy fronts (upstream); "" leaves it out.
	// Pass scheme, host and path only: a URL's userinfo, query and
	// fragment may hold a credential.
	Upstream string
	// TraceIDs records the trace id of the W3C traceparent a request
	// carried in its _meta (trace_id), for a process whose tracing
	// continues it. False leaves trace ids out.
	TraceIDs bool
	// Required makes a line that could not be written refuse the call it
	// describes (the Auditor methods return the error, and the guard
	// answers -32603). False only reports it to OnError.
	Required bool
	// OnError is told of every line that could not be written, after the
	// Writer logged it (to count it). Nil means none.
	OnError func(error)
	// Logger receives one line per failed write and per torn tail found
	// on open, never a line's content. Nil means none.
	Logger *slog.Logger
	// Now is the clock. Nil means time.Now.
	Now func() time.Time

	// Signer signs the trail's checkpoints (LoadSigner, RingSigner): with
	// one, the Writer writes a checkpoint line when it starts (the first
	// of a new trail, or a restart that goes on from the file's last
	// checkpoint), every CheckpointInterval while lines wait to be
	// sealed, at each epoch's end, at Reopen and at Close (final). Nil
	// writes no checkpoints: a round-one trail, checked with the ring
	// only (Verify).
	Signer *Signer
	// CheckpointInterval is how long a line may wait for the checkpoint
	// that seals it. Zero means DefaultCheckpointInterval; a negative
	// value runs no timer (checkpoints only at start, Reopen, Close and
	// Checkpoint).
	CheckpointInterval time.Duration
	// Epoch is how long an evolving key (KeyEvolving) signs before it
	// evolves, at the next checkpoint. Zero means DefaultEpoch; a
	// negative value never evolves it.
	Epoch time.Duration
	// OnCheckpoint is called with every checkpoint once its line is
	// written and the trail fsynced, outside the Writer's lock, so the
	// caller logs it as one record and a log pipeline carries a copy off
	// the host: log.Info("mrtr audit checkpoint", CheckpointLogKey, cp)
	// with slog's JSONHandler is what ReadCheckpoints reads back. Nil
	// means none.
	OnCheckpoint func(Checkpoint)
}

// The defaults of Options.CheckpointInterval and Options.Epoch: a
// checkpoint every 10 s, and journald's sealing interval for an epoch.
const (
	DefaultCheckpointInterval = 10 * time.Second
	DefaultEpoch              = 15 * time.Minute
)

// Writer writes a trail: one line per event, each linked to the one
// before it and MACed. It implements mrtr.Auditor: set it as
// mrtr.Options.Auditor. A Writer is safe for concurrent use.
//
// Buffering: group commit, nothing held in the process. A line is
// encoded and linked under the Writer's lock, in the order of the chain,
// and the call it describes waits until the line is written: by one
// write(2) (one Write on the io.Writer) that carries every line queued
// while the write before it was in flight. So a call waits for at most
// two writes, the one in flight when its line was queued and its own,
// however many calls write at once, and a line the call's answer depends
// on is in the kernel before the client is answered. There is no fsync:
// a crash of the machine (not of the process) may lose the lines the
// kernel had not written back, which Verify reports as a truncated tail.
//
// A write that fails loses its lines, and the next line written links to
// the last one lost, so Verify names the gap (a broken link). A write cut
// short inside its last line leaves that line torn: the next line ends it
// and links to the bytes written of it, as after a restart on a torn
// file (OpenFile), so Verify names the torn line and checks the lines
// after it.
type Writer struct {
	opts Options
	log  *slog.Logger
	now  func() time.Time

	mu      sync.Mutex
	out     io.Writer
	file    *os.File // when the Writer opened it (OpenFile)
	path    string
	prev    []byte    // the link to the last line queued; empty at a chain's start
	torn    bool      // the destination ends inside a line: end it first
	pending []byte    // lines queued for the next write
	spare   []byte    // the buffer of the last write, for reuse
	cur     *batch    // the callers waiting for pending to be written; nil when none
	lines   []*Line   // the lines encoded in pending, in order, to link them again (relink)
	writing bool      // a write is in flight
	idle    sync.Cond // signalled when a write ends (writing turns false); L is &mu
	closeMe io.Closer
	keys    *reqstate.KeyRing // the ring keyed below
	mac     map[string]*macs  // by kid, for keys

	// With a Signer (checkpoint.go): the state of the checkpoints.
	sign         *Signer
	cpMu         sync.Mutex // one checkpoint prepared at a time
	count        uint64     // lines queued since the trail began
	unsealed     int        // lines queued since the last checkpoint
	seq          uint64     // the last checkpoint's sequence
	cpHash       string     // its Hash
	lastTime     time.Time  // the last line's time: no line goes back before it
	epochAt      time.Time  // when the current epoch began, for Options.Epoch
	certs        []Cert     // for the next checkpoint: leading to the key's epoch
	abandon      *Abandoned // for the next checkpoint: a restart's
	stop         chan struct{}
	stopped      sync.WaitGroup
	closing      bool
	certsPerLine int // MaxCertsPerLine, but in tests
}

// batch is the lines of one write, and its outcome.
type batch struct {
	ready chan struct{} // closed when the write before it ended: its turn
	done  chan struct{} // closed when it was written (or not: err)
	err   error
}

// NewWriter returns a Writer that appends to w a chain whose last line's
// link is prev ("" to start a chain; see Tail and LinkOf). A nil
// opts.Keys, or a prev that is not a link, is a programmer error and
// panics.
func NewWriter(w io.Writer, prev string, opts *Options) *Writer {
	if opts == nil || opts.Keys == nil {
		panic("audit: NewWriter needs Options.Keys")
	}
	if prev != "" && (len(prev) != 43 || strings.IndexFunc(prev, func(r rune) bool { return r > 0x7f || !isBase64URL(byte(r)) }) >= 0) {
		panic("audit: NewWriter: prev is not a link (43 base64url characters)")
	}
	aw := &Writer{opts: *opts, out: w, prev: []byte(prev)}
	aw.idle.L = &aw.mu
	aw.log = opts.Logger
	if aw.log == nil {
		aw.log = slog.New(slog.DiscardHandler)
	}
	aw.now = opts.Now
	if aw.now == nil {
		aw.now = time.Now
	}
	if opts.Signer != nil {
		if prev != "" {
			panic("audit: NewWriter: a Writer with a Signer starts a trail (prev \"\"); OpenFile goes on with one")
		}
		aw.sign = opts.Signer
		aw.initSigned()
		aw.certs = aw.sign.certsSince(0)
		aw.start()
	}
	return aw
}

// tick waits for the next tick of the timer and writes a checkpoint when
// lines wait to be sealed or the epoch has run out; false when the
// Writer closes.
func (w *Writer) tick(c <-chan time.Time) bool {
	select {
	case <-w.stop:
		return false
	case <-c:
	}
	w.mu.Lock()
	due := w.unsealed > 0 || w.epochDue(w.now())
	w.mu.Unlock()
	if due {
		w.checkpoint(false)
	}
	return true
}

// initSigned sets what a Writer with a Signer needs before its first
// checkpoint.
func (w *Writer) initSigned() {
	_, since, _ := w.sign.state()
	w.epochAt = since
	if since.IsZero() {
		w.epochAt = w.now()
	}
	if w.sign.Mode() == KeyStatic {
		w.log.Warn("audit: the key file cannot be rewritten; the key signs without evolving", "why", w.sign.WhyStatic())
	}
}

// start writes the first checkpoint (a new trail's, or a restart's) and
// starts the timer. It returns the error of that checkpoint's write: the
// timer runs anyway, and the next checkpoint tries again.
func (w *Writer) start() error {
	// More certifications than a checkpoint carries open the trail in
	// certs lines first (a trail begun with a key of a late epoch).
	for w.seq == 0 && w.abandon == nil && len(w.certs) > certsPerLine {
		l := &Line{Event: EventCerts, Node: w.opts.Node, Certs: w.certs[:certsPerLine]}
		w.certs = w.certs[certsPerLine:]
		w.write(l, nil)
	}
	err := w.checkpoint(false)
	iv := w.opts.CheckpointInterval
	if iv == 0 {
		iv = DefaultCheckpointInterval
	}
	if iv < 0 {
		return err
	}
	w.stop = make(chan struct{})
	w.stopped.Go(func() {
		t := time.NewTicker(iv)
		defer t.Stop()
		for w.tick(t.C) {
		}
	})
	return err
}

// OpenFile opens path for appending (created with mode 0600) and returns
// a Writer that goes on with the chain of its last line (Tail); with
// Options.Signer, from its last checkpoint instead, and it writes its
// first checkpoint before it returns (a failed write of it goes to
// OnError, as any line's). A file
// whose last line is torn (no newline: a crash mid-write) is not glued
// onto: the first line written ends it with a newline and links to its
// bytes, so that Verify names the torn line and checks the lines after
// it.
func OpenFile(path string, opts *Options) (*Writer, error) {
	f, prev, torn, err := openAppend(path)
	if err != nil {
		return nil, err
	}
	if opts != nil && opts.Signer != nil {
		return openSigned(f, path, torn, opts)
	}
	w := NewWriter(f, prev, opts)
	w.file, w.path, w.torn = f, path, torn
	if torn {
		w.log.Warn("audit: the trail ends in a torn line; it is ended, and verify will name it", "path", path)
	}
	return w, nil
}

// openSigned is OpenFile with a Signer: the Writer goes on from the
// file's last checkpoint (not from its last line, which anyone who can
// write the file chose), and its first line is a checkpoint that
// abandons the lines after that one, if any.
func openSigned(f *os.File, path string, torn bool, opts *Options) (*Writer, error) {
	// Only a regular file holds a trail to go on with: a device
	// (/dev/full reads zeros for ever) or a pipe starts one.
	st := new(trailState)
	if fi, err := f.Stat(); err != nil || fi.Mode().IsRegular() {
		if st, err = scanFile(path); err != nil {
			f.Close()
			return nil, err
		}
	}
	o := *opts
	o.Signer = nil
	w := NewWriter(f, "", &o)
	w.opts.Signer = opts.Signer
	w.sign = opts.Signer
	w.file, w.path, w.torn = f, path, torn
	w.initSigned()
	if err := w.restartFrom(st, path); err != nil {
		f.Close()
		return nil, err
	}
	// A first checkpoint not written was logged and told OnError, as any
	// line; the next checkpoint tries again, and with Required the calls
	// whose lines fail are refused (as a round-one Writer's are).
	w.start()
	return w, nil
}

func openAppend(path string) (f *os.File, prev string, torn bool, err error) {
	f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, "", false, fmt.Errorf("open audit trail: %w", err)
	}
	r, err := os.Open(path)
	if err != nil {
		f.Close()
		return nil, "", false, fmt.Errorf("read audit trail: %w", err)
	}
	defer r.Close()
	prev, torn, err = Tail(r)
	if err != nil {
		f.Close()
		return nil, "", false, fmt.Errorf("read audit trail %s: %w", path, err)
	}
	return f, prev, torn, nil
}

// Tail reads the end of a trail and returns the link its next line must
// carry: the base64url SHA-256 of its last line ("" for an empty trail),
// and whether that last line is torn (no newline after it). It reads at
// most MaxLineBytes+2 bytes from the end: the longest line, its newline
// and the newline of the line before it.
func Tail(r io.ReadSeeker) (prev string, torn bool, err error) {
	size, err := r.Seek(0, io.SeekEnd)
	if err != nil || size == 0 {
		return "", false, err
	}
	n := min(size, MaxLineBytes+2)
	buf := make([]byte, n)
	if _, err := r.Seek(size-n, io.SeekStart); err != nil {
		return "", false, err
	}
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", false, err
	}
	torn = buf[len(buf)-1] != '\n'
	last := buf
	if !torn {
		last = last[:len(last)-1]
	}
	i := bytes.LastIndexByte(last, '\n')
	if i < 0 && n < size {
		return "", false, errors.New("last line longer than audit.MaxLineBytes")
	}
	return linkOf(last[i+1:]), torn, nil
}

// Reopen opens the Writer's file again, by name, and closes the one it
// had: after logrotate moved it, lines go to a new file at the same path.
// It waits for the write in flight, if any, and does the rest under the
// Writer's lock, so no line is written meanwhile:
//   - the same file (same device and inode: nothing moved it) keeps the
//     file it has and the chain held in memory, so lines cut from it
//     show as a broken link on the next line, never a clean chain;
//   - a new, empty file goes on with the chain held in memory: its first
//     line links to the last line of the old one;
//   - another file that is not empty (moved there by someone else) goes
//     on from its own last line (Tail), with a warning in the log.
//
// A Writer that did not open a file (NewWriter) has nothing to reopen and
// returns nil. On an error the Writer keeps the file it had.
func (w *Writer) Reopen() error {
	w.cpMu.Lock() // no checkpoint prepared meanwhile: reopen may go on from another file's
	err := w.reopen()
	w.cpMu.Unlock()
	if err != nil {
		return err
	}
	if w.sign != nil {
		return w.checkpoint(false)
	}
	return nil
}

func (w *Writer) reopen() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.path == "" {
		return nil
	}
	// Wait for the write in flight, and write what is queued to the file
	// it was linked in.
	for {
		for w.writing {
			w.idle.Wait()
		}
		if len(w.pending) == 0 {
			break
		}
		w.lead(w.cur)
		w.mu.Lock()
	}
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open audit trail: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("stat audit trail: %w", err)
	}
	if w.file != nil {
		if had, err := w.file.Stat(); err == nil && os.SameFile(had, fi) {
			return f.Close() // the same file: the chain held in memory goes on
		}
	}
	if fi.Size() == 0 {
		w.torn = false // a new file: the torn line, if any, stays in the old one
	} else if w.sign != nil {
		st, err := scanFile(w.path)
		if err == nil {
			err = w.restartFrom(st, w.path)
		}
		if err != nil {
			f.Close()
			return err
		}
		w.log.Warn("audit: the trail's path holds another file that is not empty; the chain goes on from its last checkpoint", "path", w.path)
		w.torn = st.torn
	} else {
		prev, torn, err := tailOf(w.path, fi)
		if err != nil {
			f.Close()
			return err
		}
		w.log.Warn("audit: the trail's path holds another file that is not empty; the chain goes on from its last line", "path", w.path)
		if torn {
			w.log.Warn("audit: the trail ends in a torn line; it is ended, and verify will name it", "path", w.path)
		}
		w.torn = torn
		w.relink([]byte(prev))
	}
	old := w.file
	w.out, w.file = f, f
	if old == nil {
		return nil
	}
	return old.Close()
}

// tailOf reads the Tail of the file at path, which must be the file fi
// describes (the one just opened for appending).
func tailOf(path string, fi os.FileInfo) (prev string, torn bool, err error) {
	r, err := os.Open(path)
	if err != nil {
		return "", false, fmt.Errorf("read audit trail: %w", err)
	}
	defer r.Close()
	if rfi, err := r.Stat(); err != nil || !os.SameFile(rfi, fi) {
		return "", false, fmt.Errorf("read audit trail %s: the file changed while it was opened", path)
	}
	prev, torn, err = Tail(r)
	if err != nil {
		return "", false, fmt.Errorf("read audit trail %s: %w", path, err)
	}
	return prev, torn, nil
}

// relink encodes the pending lines again, the first linked to prev: the
// chain goes on from another line than the one they were linked to. When
// a line can no longer be encoded (no key seals now), they keep their
// links. Called with w.mu held and no write in flight (or at the end of
// one, in lead).
func (w *Writer) relink(prev []byte) {
	lines, pending, had := w.lines, w.pending, w.prev
	for _, l := range lines {
		if l.Checkpoint != nil { // signed: it keeps its link
			return
		}
	}
	count, unsealed, last := w.count, w.unsealed, w.lastTime
	if w.sign != nil {
		w.count -= uint64(len(lines))
		w.unsealed -= len(lines)
	}
	w.lines, w.pending, w.prev = nil, nil, append([]byte(nil), prev...)
	for _, l := range lines {
		if err := w.queue(l, nil); err != nil {
			w.lines, w.pending, w.prev = lines, pending, had
			w.count, w.unsealed, w.lastTime = count, unsealed, last
			return
		}
	}
}

// Close closes the file the Writer opened, if any. Lines written after it
// fail. With a Signer it first stops the timer and writes the final
// checkpoint (final: true), once.
func (w *Writer) Close() error {
	if w.sign != nil {
		w.mu.Lock()
		first := !w.closing
		w.closing = true
		w.mu.Unlock()
		if first {
			if w.stop != nil {
				close(w.stop)
				w.stopped.Wait()
			}
			w.checkpoint(true)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.file == nil {
		return nil
	}
	if w.writing {
		w.closeMe = w.file
		return nil
	}
	return w.file.Close()
}

// Prev returns the link the next line will carry.
func (w *Writer) Prev() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.prev)
}

// errNoKey reports a ring without a key that seals now.
var errNoKey = errors.New("audit: no key of the ring seals now")

// Write appends l to the trail: its schema, time (when zero), prev, kid
// and mac are set here; its ArgsDigest is taken as given (see
// Digest). It returns the error of the destination, if any, after
// logging it and telling OnError, whatever Options.Required says.
func (w *Writer) Write(l *Line) error {
	if isSealing(l.Event) || l.Checkpoint != nil || len(l.Certs) > 0 {
		return errCheckpointLine
	}
	return w.write(l, nil)
}

// errCheckpointLine is Write's error for a checkpoint line: only the
// Writer writes them.
var errCheckpointLine = errors.New("audit: checkpoint lines are written by the Writer itself")

// write encodes l, queues it and waits until it is written; hash, when
// not nil, is the arguments hash to digest under the line's key.
func (w *Writer) write(l *Line, hash *reqstate.Hash) error {
	l.Schema = Schema
	if l.Time.IsZero() {
		l.Time = w.now()
	}
	w.mu.Lock()
	err := w.queue(l, hash)
	switch {
	case err != nil:
		w.mu.Unlock()
	case !w.writing:
		// No write in flight: this call writes what is queued, its own
		// line and those of callers whose turn it is (w.cur).
		err = w.lead(w.cur)
	default:
		// A write is in flight: wait for the turn of the batch this line
		// is in, then write it, unless another of its callers does.
		b := w.cur
		if b == nil {
			b = &batch{ready: make(chan struct{}), done: make(chan struct{})}
			w.cur = b
		}
		w.mu.Unlock()
		select {
		case <-b.done:
		case <-b.ready:
			w.mu.Lock()
			if w.cur == b && !w.writing {
				w.lead(b)
			} else {
				w.mu.Unlock()
			}
		}
		<-b.done
		err = b.err
	}
	if err != nil {
		w.log.Error("audit: a line of the trail was not written", "event", l.Event, "error", err)
		if w.opts.OnError != nil {
			w.opts.OnError(err)
		}
	}
	return err
}

// queue encodes l onto the pending lines. Called with w.mu held.
func (w *Writer) queue(l *Line, hash *reqstate.Hash) error {
	if w.sign != nil && l.Time.Before(w.lastTime) {
		// Lines queue in the order of the lock, not of their clocks:
		// times never go back in a sealed trail (a verifier checks it).
		l.Time = w.lastTime
	}
	m, err := w.macsAt(l.Time)
	if err != nil {
		return err
	}
	if hash != nil {
		l.ArgsDigest = m.argsDigest(*hash)
	}
	if l.taskID != "" {
		l.Task = m.taskDigest(l.taskID)
	}
	if l.Checkpoint != nil && w.sign != nil {
		w.fill(l)
	}
	b := w.pending
	start := len(b)
	b = appendBody(b, l)
	b = append(b, `,"prev":"`...)
	b = append(b, w.prev...) // base64url: nothing to escape
	b = append(b, `","kid":`...)
	b = appendString(b, m.kid)
	macd := len(b)
	b = append(b, `,"mac":"`...)
	b = m.lineMAC(b, b[start:macd])
	b = append(b, '"', '}', '\n')
	w.pending = b
	w.lines = append(w.lines, l)
	w.prev = appendLink(w.prev[:0], b[start:len(b)-1])
	if w.sign != nil {
		w.count++
		w.lastTime = l.Time
		if l.Checkpoint != nil {
			w.unsealed = 0
		} else {
			w.unsealed++
		}
	}
	return nil
}

// lead writes the pending lines with one write, tells the callers of b
// (w.cur, nil when no caller waits) how it went, and hands the turn to
// the batch queued meanwhile. Called with w.mu held; returns with it
// unlocked, and the error of the write.
func (w *Writer) lead(b *batch) error {
	w.writing, w.cur = true, nil
	buf := w.pending
	w.pending = w.spare[:0]
	clear(w.lines)
	w.lines = w.lines[:0]
	if w.torn { // end the torn line before the first of these
		buf = append([]byte{'\n'}, buf...)
	}
	out := w.out
	w.mu.Unlock()
	n, err := out.Write(buf)
	if err == nil && n < len(buf) {
		err = io.ErrShortWrite
	}
	w.mu.Lock()
	if err != nil {
		// The lines are lost; what was written of them stays, and a line
		// cut short is ended by the next write. When it is the last line
		// of the write, the next line links to what was written of it (as
		// Tail does after a restart), so that Verify checks the lines
		// after it; when whole lines after it were lost, the next line
		// links to the last of them, and Verify names the gap.
		w.torn = n > 0 && n < len(buf) && buf[n-1] != '\n'
		if w.torn && bytes.IndexByte(buf[n:], '\n') == len(buf)-n-1 {
			start := bytes.LastIndexByte(buf[:n], '\n') + 1
			w.relink(appendLink(nil, buf[start:n]))
		}
	} else {
		w.torn = false
	}
	w.spare = buf[:0]
	w.writing = false
	w.idle.Broadcast()
	if w.closeMe != nil {
		w.closeMe.Close()
		w.closeMe = nil
	}
	if w.cur != nil {
		close(w.cur.ready)
	}
	w.mu.Unlock()
	if b != nil {
		b.err = err
		close(b.done)
	}
	return err
}

// macsAt returns the keys of the ring's sealing key at t. Called with
// w.mu held.
func (w *Writer) macsAt(t time.Time) (*macs, error) {
	ring := w.opts.Keys()
	if ring == nil {
		return nil, errNoKey
	}
	if ring != w.keys {
		w.keys, w.mac = ring, make(map[string]*macs, 1)
	}
	kid, ok := ring.SealingKey(t)
	if !ok {
		return nil, errNoKey
	}
	if m := w.mac[kid]; m != nil {
		return m, nil
	}
	for _, k := range ring.Keys() {
		if k.ID == kid {
			m := newMacs(derive(k))
			w.mac[kid] = m
			return m, nil
		}
	}
	return nil, errNoKey
}

// result is what an Auditor method returns for a write's error.
func (w *Writer) result(err error) error {
	if w.opts.Required {
		return err
	}
	return nil
}

// Resumed implements mrtr.Auditor: a resumed line for an accepted
// resume, a rejected line with the guard's reason for a refused one.
func (w *Writer) Resumed(ctx context.Context, e mrtr.ResumeEvent) error {
	l := w.lineOf(e.Call, EventResumed)
	l.Forwarder = forwardedBy(ctx)
	l.Round = e.OpenedRound
	if e.Outcome != mrtr.OutcomeOK {
		l.Event, l.Reason = EventRejected, string(e.Outcome)
	}
	for _, a := range e.Answers() {
		l.Answers = append(l.Answers, Answer{Key: mcpwire.Shown(a.Key), Action: a.Action})
	}
	return w.writeCall(l, e.Call)
}

// Paused implements mrtr.Auditor: a paused line, with the round sealed
// and the input requests' keys and methods.
func (w *Writer) Paused(ctx context.Context, e mrtr.PauseEvent) error {
	l := w.lineOf(e.Call, EventPaused)
	l.Forwarder = forwardedBy(ctx)
	l.Round = e.Round
	if e.Inputs != nil {
		l.Inputs = make([]Input, len(e.Inputs))
		for i, in := range e.Inputs {
			l.Inputs[i] = Input{Key: mcpwire.Shown(in.Key), Method: mcpwire.Shown(in.Method)}
		}
	} else {
		l.Inputs = make([]Input, len(e.Asked))
		for i, k := range e.Asked {
			l.Inputs[i].Key = mcpwire.Shown(k)
		}
	}
	return w.writeCall(l, e.Call)
}

// Ended implements mrtr.Auditor: a completed line for a call that did
// not pause (a call that paused has its paused line).
func (w *Writer) Ended(ctx context.Context, e mrtr.EndEvent) error {
	if e.Paused {
		return nil
	}
	l := w.lineOf(e.Call, EventCompleted)
	l.Forwarder = forwardedBy(ctx)
	l.Round = e.Round
	l.Outcome = string(e.Outcome)
	if e.Outcome == mrtr.OutcomeError {
		l.ErrorCode = e.ErrorCode
	}
	return w.writeCall(l, e.Call)
}

func (w *Writer) writeCall(l *Line, c mrtr.Call) error {
	h, err := c.ArgsHash()
	if err != nil { // arguments the guard refuses: no digest
		return w.result(w.write(l, nil))
	}
	return w.result(w.write(l, &h))
}

// lineOf fills in what every line of a call says.
func (w *Writer) lineOf(c mrtr.Call, event string) *Line {
	l := w.requestLine(event, c.Method, c.Target, c.Principal, c.Meta, c.RequestID)
	l.Flow = c.FlowID()
	return l
}

// requestLine fills in what every line of a request says.
func (w *Writer) requestLine(event, method, target string, p reqstate.Principal, meta map[string]any, requestID string) *Line {
	l := &Line{
		Event:     event,
		Method:    mcpwire.Shown(method),
		Target:    mcpwire.Shown(target),
		Client:    clientOf(meta),
		Upstream:  w.opts.Upstream,
		Node:      w.opts.Node,
		RequestID: mcpwire.Shown(requestID),
	}
	if p.Anonymous() {
		l.Principal.Anonymous = true
	} else {
		l.Principal.Issuer, l.Principal.Subject = mcpwire.Shown(p.Issuer), mcpwire.Shown(p.Subject)
	}
	if w.opts.TraceIDs {
		l.TraceID = traceIDOf(meta)
	}
	return l
}
