package stdio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
)

// Defaults for the zero values of Config.
const (
	DefaultMaxMessageBytes = 4 << 20
	DefaultStopGrace       = 2 * time.Second
)

// Defaults of the stderr rate limit, per child (Config.StderrBurst and
// Config.StderrRate): up to 100 lines at once, then 20 lines a second,
// about 80 KiB of log a second at most for a child that floods it (`yes
// >&2` wrote 490 MB of log in 5 s without a limit).
const (
	DefaultStderrBurst = 100
	DefaultStderrRate  = 20
)

// StderrDroppedMsg is the message of the record that counts the stderr
// lines dropped over the rate limit (attribute "dropped_lines").
const StderrDroppedMsg = "stderr lines of the upstream dropped over the rate limit"

// ChildRecordMsg is the message under which every line the child wrote on
// stderr is logged: a structured record's message is its attribute
// child.msg and its level child.level, a plain line is child.msg itself, so that a child can never write a
// record with a message of the proxy's own (an alert keyed on "mrtr
// drained: ..." is not set off by a child, or by a caller whose text a
// server echoes to stderr). The record's level is the child's, at most
// MaxChildLevel.
const ChildRecordMsg = "upstream log record"

// MaxChildLevel caps the level a child's record is logged at: a child's
// ERROR is the proxy's WARN (the proxy did not fail), and an alert on the
// proxy's errors is not set off by a child.
const MaxChildLevel = slog.LevelWarn

// StderrLineBytes caps one logged stderr line; the rest of a longer line is
// dropped and TruncatedMarker is appended to what is kept.
const StderrLineBytes = 4 << 10

// TruncatedMarker ends a stderr line that was cut to StderrLineBytes.
const TruncatedMarker = " …[truncated]"

// readBufBytes is the read buffer lent to a reader (readBufs): lines
// longer than that are assembled from pieces, up to MaxMessageBytes.
const readBufBytes = 4 << 10

var (
	// ErrMessageTooLong is reported by Err when the child wrote a stdout line
	// longer than Config.MaxMessageBytes (and was stopped for it).
	ErrMessageTooLong = errors.New("stdio: message too long")
	// ErrInvalidMessage is returned by Send for a message it cannot frame:
	// empty, or containing a newline and not valid JSON.
	ErrInvalidMessage = errors.New("stdio: invalid message")
	// ErrExited is returned by Send once the child's stdin is closed: the
	// child exited or is being stopped.
	ErrExited = errors.New("stdio: child process has exited")
)

// Config says what to run and how. Only Path is required.
type Config struct {
	// Path is the program, resolved with exec.LookPath against the proxy's
	// PATH when it contains no slash. It is run directly, never through a
	// shell.
	Path string
	// Args are the arguments after the program name.
	Args []string
	// Env holds NAME=VALUE entries added to the child's environment, which is
	// otherwise the proxy's minus every MRTR_* variable; see Environ.
	Env []string
	// Dir is the child's working directory; empty means the proxy's.
	Dir string
	// User, when set, is who the child runs as (LookupUser), instead of
	// the proxy's own user: a child that cannot read the proxy's key file
	// nor, as another uid, /proc/<proxy>/environ and memory. Starting
	// fails unless the proxy runs as root. Nil: the proxy's user.
	User *User
	// Supervisor, when set, is the argv prefix of a supervisor that runs
	// the command (Linux only; elsewhere it is ignored): Start runs
	// Supervisor[0] with Supervisor[1:], then the command's resolved path,
	// then its argv (Path as given, then Args), with the child's
	// environment plus SupervisorParentVar. The supervisor is the child
	// (Pid, the process group, User) and gets SIGUSR1 instead of SIGKILL
	// when the proxy dies, and from Stop before the group's SIGKILL; it
	// must then kill its whole process group, so that what the command
	// started does not outlive the proxy. Err and
	// the exit status are the supervisor's: it should end as its command
	// did (the same status, or killed by the same signal). mrtr's is
	// "mrtr __supervise" (internal/supervise's Argv). Nil: the command is the child.
	Supervisor []string
	// Logger gets each line the child writes on stderr, at Info, with the
	// attributes "pid" and "stream"="stderr". Nil discards stderr.
	Logger *slog.Logger
	// MaxMessageBytes caps one stdout message line, its line ending not
	// counted. Zero or less means DefaultMaxMessageBytes.
	MaxMessageBytes int
	// StopGrace is how long Stop waits after closing stdin before SIGTERM,
	// and after SIGTERM before SIGKILL. Zero or less means DefaultStopGrace.
	// A child whose stdout ends is stopped the same way, unasked (see Recv).
	StopGrace time.Duration

	// StderrBurst and StderrRate bound the stderr lines logged: a token
	// bucket of StderrBurst lines, refilled at StderrRate lines a second.
	// A line beyond it is read and dropped, and counted: one record at
	// Warn, StderrDroppedMsg with "dropped_lines", says how many (blank
	// lines among them), just before the next line logged or when stderr
	// ends. Zero or less means DefaultStderrBurst and DefaultStderrRate.
	StderrBurst int
	StderrRate  float64

	// after, when set, replaces the StopGrace timers of Stop (a test seam).
	after func(time.Duration) <-chan time.Time
	// now, when set, is the stderr rate limit's clock (a test seam).
	now func() time.Time
}

// Child is one running (or ended) child process. Its methods are safe for
// concurrent use.
type Child struct {
	name       string // Config.Path as given, for errors
	pid        int
	supervised bool // the child is Config.Supervisor's
	max        int
	grace      time.Duration
	after      func(time.Duration) <-chan time.Time

	stdin     *os.File
	stdinMu   sync.Mutex // serializes Send
	stdinShut atomic.Bool
	stdinOnce sync.Once

	stdout     *os.File
	msgs       chan []byte
	stdoutDone chan struct{} // the stdout reader has returned
	abandon    chan struct{} // Stop gave up waiting for Recv to be drained
	stderrDone chan struct{} // stderr fully logged (closed at once without a Logger)
	stderrEnd  tail          // the end of stderr, for StderrTail

	exited chan struct{} // the process has exited (Linux: not yet reaped)
	done   chan struct{} // reaped; err is set
	err    error

	sigMu  sync.Mutex
	reaped bool // under sigMu: the group id may no longer be ours

	protoMu  sync.Mutex
	protoErr error

	stopOnce  sync.Once
	stopping  chan struct{}
	hurryOnce sync.Once
	hurry     chan struct{} // a Stop context ended: skip the grace periods
}

// Start runs the child. The error names the command, never its arguments
// or environment.
func Start(cfg Config) (*Child, error) {
	if cfg.Path == "" {
		return nil, errors.New("stdio: start: no command")
	}
	if !supported {
		return nil, fmt.Errorf("stdio: start %q: %w", cfg.Path, errors.ErrUnsupported)
	}
	env, err := Environ(os.Environ(), cfg.Env)
	if err != nil {
		return nil, fmt.Errorf("stdio: start %q: %w", cfg.Path, err)
	}
	cmd, err := command(cfg, env)
	if err != nil {
		return nil, fmt.Errorf("stdio: start %q: %w", cfg.Path, err)
	}
	cmd.Dir = cfg.Dir
	pidfd := -1
	cmd.SysProcAttr = sysProcAttr(&pidfd, cfg.User, supervised(cfg))

	c := &Child{
		name:       cfg.Path,
		supervised: supervised(cfg),
		max:        cfg.MaxMessageBytes,
		grace:      cfg.StopGrace,
		after:      cfg.after,
		msgs:       make(chan []byte),
		stdoutDone: make(chan struct{}),
		abandon:    make(chan struct{}),
		stderrDone: make(chan struct{}),
		exited:     make(chan struct{}),
		done:       make(chan struct{}),
		stopping:   make(chan struct{}),
		hurry:      make(chan struct{}),
		stderrEnd:  tail{max: TailBytes},
	}
	if c.max <= 0 {
		c.max = DefaultMaxMessageBytes
	}
	if c.grace <= 0 {
		c.grace = DefaultStopGrace
	}

	// Our own pipes rather than cmd.StdinPipe and friends: Wait then only
	// waits for the process, and reading stdout is not tied to reaping.
	var parentEnds, childEnds []*os.File
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err != nil {
			closeAll(parentEnds)
			closeAll(childEnds)
			return nil, nil, fmt.Errorf("stdio: start %q: %w", cfg.Path, err)
		}
		return r, w, nil
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, err
	}
	parentEnds, childEnds = append(parentEnds, inW), append(childEnds, inR)
	outR, outW, err := pipe()
	if err != nil {
		return nil, err
	}
	parentEnds, childEnds = append(parentEnds, outR), append(childEnds, outW)
	var errR *os.File
	if cfg.Logger != nil {
		var errW *os.File
		if errR, errW, err = pipe(); err != nil {
			return nil, err
		}
		parentEnds, childEnds = append(parentEnds, errR), append(childEnds, errW)
		cmd.Stderr = errW
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	c.stdin, c.stdout = inW, outR

	err = startCmd(cmd)
	closeAll(childEnds)
	if err != nil {
		closeAll(parentEnds)
		return nil, fmt.Errorf("stdio: start %q: %w", cfg.Path, err)
	}
	c.pid = cmd.Process.Pid
	go c.wait(cmd, pidfd, errR)
	go c.readStdout()
	if errR != nil {
		lim := &lineBucket{burst: float64(cfg.StderrBurst), rate: cfg.StderrRate, now: cfg.now}
		if lim.burst <= 0 {
			lim.burst = DefaultStderrBurst
		}
		if lim.rate <= 0 {
			lim.rate = DefaultStderrRate
		}
		if lim.now == nil {
			lim.now = time.Now
		}
		lim.tokens = lim.burst
		go c.readStderr(errR, cfg.Logger.With("pid", c.pid, "stream", "stderr"), lim)
	} else {
		close(c.stderrDone)
	}
	return c, nil
}

// wait waits for the child to exit and reaps it. On Linux it waits on the
// child's pidfd in the runtime's poller, so a running child holds no
// thread; the thread the child was forked from is the spawner's, which
// outlives it (see spawner).
func (c *Child) wait(cmd *exec.Cmd, pidfd int, errR *os.File) {
	defer endCmd()
	waited := waitExited(pidfd, c.pid)
	if waited {
		// Exited, not yet reaped: its group id is still its own, so what is
		// left in the group can be killed without hitting a stranger.
		close(c.exited)
		c.sigMu.Lock()
		signalGroup(c.pid, true)
		c.reaped = true
		c.sigMu.Unlock()
	}
	werr := cmd.Wait()
	if !waited {
		// Without waitExited, a signal sent between the reap inside Wait and
		// here could reach a reused group id: a short window, documented.
		c.sigMu.Lock()
		c.reaped = true
		c.sigMu.Unlock()
		close(c.exited)
	}
	c.closeStdin()
	if errR != nil {
		// Anything still holding stderr left the group; do not wait for it
		// beyond the grace period.
		errR.SetReadDeadline(time.Now().Add(c.grace))
		<-c.stderrDone
	}

	var exitErr error
	if werr != nil {
		exitErr = fmt.Errorf("%s (pid %d): %w", c.name, c.pid, werr)
	}
	c.protoMu.Lock()
	protoErr := c.protoErr
	c.protoMu.Unlock()
	switch {
	case protoErr != nil && exitErr != nil:
		c.err = fmt.Errorf("%w; then %w", protoErr, exitErr)
	case protoErr != nil:
		c.err = protoErr
	default:
		c.err = exitErr
	}
	close(c.done)
}

// Pid returns the child's process id, which is also its process group id.
func (c *Child) Pid() int { return c.pid }

// Recv returns the channel of the child's stdout messages: every non-empty
// line, without its line ending ("\n" or "\r\n"), in order, each slice the
// receiver's own. It is closed when stdout ends, normally when the child
// exits. An unterminated last line is not a message and is dropped. Once
// stdout has ended the child is stopped as by Stop, whether or not it has
// exited: a child that closes stdout and lives on has left the transport
// and is not kept (it gets StopGrace to exit, then SIGTERM, then SIGKILL
// to its group). After
// Stop, messages not received within StopGrace of the child's reaping are
// dropped and the channel is closed.
func (c *Child) Recv() <-chan []byte { return c.msgs }

// Done is closed when the child has exited and been reaped, and everything
// it wrote on stderr has been logged.
func (c *Child) Done() <-chan struct{} { return c.done }

// Err reports why the child ended, once Done is closed (nil before): nil for
// exit status 0, else an error wrapping the *exec.ExitError (exit status or
// signal), and ErrMessageTooLong when it was stopped for an over-long line.
func (c *Child) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// StderrTail returns the last lines the child wrote on stderr: at most
// TailLines of them and TailBytes in all, blank lines left out, a line cut
// by the byte bound dropped, each line sanitised (control and format
// characters escaped, invalid UTF-8 replaced) and every value of the
// proxy's MRTR_* variables replaced by "[redacted]". Once Done is closed
// it is the end of everything the child wrote there; before, what it wrote
// so far. Nil when the child wrote nothing, or without Config.Logger
// (stderr is then not read). With Err, it says why a child that ended
// early did.
func (c *Child) StderrTail() []string { return c.stderrEnd.lines(TailLines) }

// Send writes msg and a newline to the child's stdin, whole, never
// interleaved with another Send. A msg containing a newline or carriage
// return is compacted (json.Compact) if it is valid JSON, else refused with
// ErrInvalidMessage, as is an empty one. Send blocks while the child does
// not read; it returns an error wrapping ErrExited once stdin is closed
// (the child exited, or Stop began), even for a Send already blocked.
func (c *Child) Send(msg []byte) error {
	if bytes.ContainsAny(msg, "\r\n") {
		var buf bytes.Buffer
		if err := json.Compact(&buf, msg); err != nil {
			return fmt.Errorf("%w: contains a newline and is not valid JSON", ErrInvalidMessage)
		}
		msg = buf.Bytes()
	}
	if len(bytes.TrimSpace(msg)) == 0 {
		return fmt.Errorf("%w: empty", ErrInvalidMessage)
	}
	line := make([]byte, len(msg)+1)
	copy(line, msg)
	line[len(msg)] = '\n'

	c.stdinMu.Lock()
	defer c.stdinMu.Unlock()
	if c.stdinShut.Load() {
		return fmt.Errorf("send to %s (pid %d): %w", c.name, c.pid, ErrExited)
	}
	if _, err := c.stdin.Write(line); err != nil {
		if c.stdinShut.Load() || errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EPIPE) {
			return fmt.Errorf("send to %s (pid %d): %w", c.name, c.pid, ErrExited)
		}
		return fmt.Errorf("send to %s (pid %d): %w", c.name, c.pid, err)
	}
	return nil
}

// closeStdin closes the child's stdin once. It does not take stdinMu: a
// Send blocked in Write returns when the file is closed.
func (c *Child) closeStdin() {
	c.stdinOnce.Do(func() {
		c.stdinShut.Store(true)
		c.stdin.Close()
	})
}

// Stop ends the child: it closes stdin, waits StopGrace for the child to
// exit, sends SIGTERM to its process group, waits StopGrace again, then
// sends SIGKILL (a supervisor first gets SIGUSR1, and up to half a second
// to kill all its command started; see Config.Supervisor). It returns
// once the child is reaped (Done is closed). When ctx ends first, the
// remaining grace is skipped (SIGKILL at once) and Stop returns ctx.Err()
// after the reap. Stop is idempotent: later and concurrent calls wait for
// the same end. Err says how the child ended.
func (c *Child) Stop(ctx context.Context) error {
	c.beginStop()
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
	}
	c.hurryOnce.Do(func() { close(c.hurry) })
	<-c.done
	return ctx.Err()
}

func (c *Child) beginStop() {
	c.stopOnce.Do(func() {
		close(c.stopping)
		go c.stopSequence()
	})
}

func (c *Child) stopSequence() {
	c.closeStdin()
	if !c.waitExit(c.grace) {
		c.signal(false)
		if !c.waitExit(c.grace) {
			// A supervisor is first asked to kill everything the command
			// started, what left the group included, as when the proxy
			// dies (SIGKILL of the group would end it before it could);
			// the group's SIGKILL follows if it has not exited soon.
			if !c.supervised || !c.signalSupervisor() || !c.waitExit(min(c.grace, supervisorKillWait)) {
				c.signal(true)
			}
		}
	}
	<-c.done
	elapsed, stop := c.graceTimer()
	defer stop()
	select {
	case <-c.stdoutDone:
	case <-c.hurry:
		c.giveUpStdout()
	case <-elapsed:
		c.giveUpStdout()
	}
}

// graceTimer returns a channel that receives when a grace period elapses,
// and a function releasing it.
func (c *Child) graceTimer() (<-chan time.Time, func()) { return c.timer(c.grace) }

// timer returns a channel that receives when d elapses, and a function
// releasing it.
func (c *Child) timer(d time.Duration) (<-chan time.Time, func()) {
	if c.after != nil {
		return c.after(d), func() {}
	}
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

func (c *Child) giveUpStdout() {
	close(c.abandon)
	c.stdout.Close()
}

// supervisorKillWait bounds the wait for a supervisor asked to kill its
// command and all it started (it takes milliseconds).
const supervisorKillWait = 500 * time.Millisecond

// waitExit waits up to d for the child to exit, and reports whether it
// did.
func (c *Child) waitExit(d time.Duration) bool {
	elapsed, stop := c.timer(d)
	defer stop()
	select {
	case <-c.exited:
		return true
	case <-c.hurry:
		select {
		case <-c.exited:
			return true
		default:
			return false
		}
	case <-elapsed:
		return false
	}
}

// signal sends SIGTERM (or SIGKILL) to the child's process group, unless
// the child may already be reaped and its group id reused, and reports
// whether it did.
func (c *Child) signal(kill bool) bool {
	c.sigMu.Lock()
	defer c.sigMu.Unlock()
	if c.reaped {
		return false
	}
	signalGroup(c.pid, kill)
	return true
}

// signalSupervisor sends the supervisor its parent-death signal, on which
// it kills its command and all the command started, then itself, unless
// it may already be reaped, and reports whether it did.
func (c *Child) signalSupervisor() bool {
	c.sigMu.Lock()
	defer c.sigMu.Unlock()
	if c.reaped {
		return false
	}
	return signalSupervisor(c.pid)
}

func (c *Child) setProtoErr(err error) {
	c.protoMu.Lock()
	if c.protoErr == nil {
		c.protoErr = err
	}
	c.protoMu.Unlock()
}

// readStdout splits stdout into messages, holding at most about
// MaxMessageBytes of one line, and no read buffer while it waits.
func (c *Child) readStdout() {
	defer close(c.msgs)
	defer close(c.stdoutDone)
	defer c.stdout.Close()
	var line []byte
	broken := false // after a protocol error: drain, deliver nothing
	_ = readChunks(c.stdout, func(chunk []byte) bool {
		for len(chunk) > 0 {
			frag, complete := chunk, false
			if i := bytes.IndexByte(chunk, '\n'); i >= 0 {
				frag, complete = chunk[:i+1], true
			}
			chunk = chunk[len(frag):]
			if broken {
				continue
			}
			if contentLen(line, frag, complete) > c.max {
				broken, line = true, nil
				c.setProtoErr(fmt.Errorf("%s (pid %d): stdout line longer than %d bytes: %w", c.name, c.pid, c.max, ErrMessageTooLong))
				c.beginStop()
				continue
			}
			line = append(line, frag...) // the receiver's own: never the read buffer
			if !complete {
				continue
			}
			msg := trimEOL(line)
			line = nil
			if len(bytes.TrimSpace(msg)) > 0 {
				select {
				case c.msgs <- msg:
				case <-c.abandon:
					return false
				}
			}
		}
		return true
	})
	// io.EOF, or the file closed by Stop giving up on it. An unterminated
	// last line is not a message.
	//
	// Stdout is the transport: once it has ended the child can answer
	// nothing, and one that closed it and lives on (or left it to a
	// process that exited) would hold its slot and its resources forever.
	// So it is stopped as Stop does: stdin closed, StopGrace, SIGTERM to
	// its group, StopGrace, SIGKILL. A child that is exiting anyway (the
	// usual way stdout ends) is reaped as before.
	c.beginStop()
}

// lineBucket is the token bucket of the stderr lines a child may have
// logged: burst lines at once, refilled at rate lines a second.
type lineBucket struct {
	burst, rate float64
	now         func() time.Time
	tokens      float64
	last        time.Time
}

// empty reports whether no token is left at t.
func (b *lineBucket) empty(t time.Time) bool {
	if !b.last.IsZero() {
		if d := t.Sub(b.last); d > 0 {
			b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
		}
	}
	b.last = t
	return b.tokens < 1
}

// allow takes a token at t, and reports whether there was one.
func (b *lineBucket) allow(t time.Time) bool {
	if !b.empty(t) {
		b.tokens--
		return true
	}
	return false
}

// readStderr logs each stderr line, cut to StderrLineBytes, as lim
// allows; an unterminated last line is logged too.
func (c *Child) readStderr(r *os.File, log *slog.Logger, lim *lineBucket) {
	defer close(c.stderrDone)
	defer r.Close()
	ctx := context.Background()
	var head []byte   // the line's first StderrLineBytes+1 bytes (room for a '\r' before the '\n')
	n, cr := 0, false // the line's length so far, its line ending not counted; whether its last byte is '\r'
	dropped := 0      // lines dropped since the last one logged
	var at time.Time  // when the chunk being handled was read
	reportDropped := func() {
		if dropped > 0 {
			log.LogAttrs(ctx, slog.LevelWarn, StderrDroppedMsg, slog.Int("dropped_lines", dropped))
			dropped = 0
		}
	}
	emit := func() {
		content := n
		if cr {
			content--
		}
		// The buffer is kept for the chunk's next line (a flood of short
		// lines would allocate one a line), and let go after the chunk.
		if content <= StderrLineBytes && len(bytes.TrimSpace(head[:content])) == 0 {
			if lim.empty(at) {
				dropped++ // as the bulk count below would have
			}
			head, n, cr = head[:0], 0, false
			return // blank: not logged
		}
		if !lim.allow(at) {
			dropped++
			head, n, cr = head[:0], 0, false
			return
		}
		reportDropped()
		if content <= StderrLineBytes {
			line := string(head[:content])
			if level, msg, attrs, ok := childRecord(line); ok {
				// A structured record: under a message of its own, the
				// child's message, level and other attributes apart, so
				// none can pass for ours; at the child's level, at most
				// WARN.
				child := append([]slog.Attr{slog.String("msg", msg), slog.String("level", level.String())}, attrs...)
				log.LogAttrs(ctx, min(level, MaxChildLevel), ChildRecordMsg, slog.Attr{Key: "child", Value: slog.GroupValue(child...)})
			} else {
				// A plain line: under the same message, the line as
				// child.msg, so that an echoed "mrtr drained: ..." is
				// never a record of ours either.
				log.LogAttrs(ctx, unstructuredLevel(line), ChildRecordMsg, slog.Attr{Key: "child", Value: slog.GroupValue(slog.String("msg", line))})
			}
		} else {
			// Longer than the cap: keep the head, count and drop the rest.
			text := validPrefix(string(head[:StderrLineBytes])) + TruncatedMarker
			log.LogAttrs(ctx, unstructuredLevel(text), ChildRecordMsg, slog.Attr{Key: "child", Value: slog.GroupValue(slog.String("msg", text))}, slog.Int("line_bytes", content))
		}
		head, n, cr = head[:0], 0, false
	}
	err := readChunks(r, func(chunk []byte) bool {
		c.stderrEnd.Write(chunk) // every byte, logged or over the rate limit
		at = lim.now()
		for len(chunk) > 0 {
			if n == 0 && lim.empty(at) {
				// No line of the chunk can be logged (the bucket fills
				// with time, and the chunk has one): count them at once,
				// as a flood of short lines would cost a core otherwise.
				k := bytes.Count(chunk, []byte{'\n'})
				dropped += k
				if k > 0 {
					chunk = chunk[bytes.LastIndexByte(chunk, '\n')+1:]
				}
				if len(chunk) == 0 {
					break
				}
			}
			frag, complete := chunk, false
			if i := bytes.IndexByte(chunk, '\n'); i >= 0 {
				frag, complete = chunk[:i], true
				chunk = chunk[i+1:]
			} else {
				chunk = nil
			}
			if len(frag) > 0 {
				head = append(head, frag[:min(len(frag), StderrLineBytes+1-len(head))]...)
				n += len(frag)
				cr = frag[len(frag)-1] == '\r'
			}
			if complete {
				emit()
			}
		}
		if n == 0 {
			head = nil // an idle child's reader holds no line buffer
		}
		return true
	})
	if n > 0 {
		at = lim.now()
		emit()
	}
	reportDropped()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, os.ErrClosed) {
		log.LogAttrs(ctx, slog.LevelWarn, "reading stderr of the upstream", slog.String("error", err.Error()))
	}
}

// readBufs lends the readers of every child a read buffer only while
// there is data to read: a child that writes nothing holds none (two 4 KiB
// buffers of its own were most of an idle child's heap in the proxy).
var readBufs bufList

// maxFreeBufs bounds the buffers readBufs keeps for the next reader.
const maxFreeBufs = 32

// bufList is a free list of read buffers. Not a sync.Pool: under the race
// detector that drops a quarter of what it is given, so a long read would
// allocate a buffer every few chunks.
type bufList struct {
	mu   sync.Mutex
	free []*[]byte
}

func (l *bufList) get() *[]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.free); n > 0 {
		b := l.free[n-1]
		l.free = l.free[:n-1]
		return b
	}
	b := make([]byte, readBufBytes)
	return &b
}

func (l *bufList) put(b *[]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.free) < maxFreeBufs {
		l.free = append(l.free, b)
	}
}

// readChunks reads f until it ends, handing each chunk read to each, in
// order, until each returns false. It waits for data in the runtime's
// poller without a buffer, and takes one from readBufs only to read and
// handle a chunk. (A file the poller does not know is in blocking mode:
// there the read itself waits, holding its buffer.) It returns io.EOF at
// the end of f, nil when each stopped it, else the reading error
// (os.ErrDeadlineExceeded after f's read deadline).
func readChunks(f *os.File, each func([]byte) bool) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var (
		bp   *[]byte
		n    int
		rerr error
	)
	read := func(fd uintptr) bool { // one closure for every read: no allocation per chunk
		bp = readBufs.get()
		var again bool
		n, again, rerr = readFD(fd, *bp)
		if again {
			readBufs.put(bp)
			bp = nil
			return false // wait for data, holding no buffer
		}
		return true
	}
	for {
		err := rc.Read(read)
		switch {
		case err != nil:
			return err
		case rerr != nil:
			readBufs.put(bp)
			return rerr
		case n <= 0:
			readBufs.put(bp)
			return io.EOF
		}
		more := each((*bp)[:n])
		readBufs.put(bp)
		if !more {
			return nil
		}
	}
}

// contentLen is the length of the line made of line and frag, without its
// line ending when complete.
func contentLen(line, frag []byte, complete bool) int {
	n := len(line) + len(frag)
	if !complete {
		return n
	}
	n-- // '\n'
	var prev byte
	switch {
	case len(frag) >= 2:
		prev = frag[len(frag)-2]
	case len(line) > 0:
		prev = line[len(line)-1]
	}
	if prev == '\r' {
		n--
	}
	return n
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// validPrefix drops a rune the cut split in two.
func validPrefix(s string) string {
	for i := 0; i < utf8.UTFMax && len(s) > 0; i++ {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size != 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}
