package runner

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/mrtr-go/mrtr/internal/stdio"
)

// OverflowUID is the uid the kernel reports for a peer whose uid has no
// mapping in the runner's user namespace (kernel.overflowuid): it names
// nobody in particular, so it is never allowed.
const OverflowUID = 65534

// DefaultMaxChildren is Options.MaxChildren's default.
const DefaultMaxChildren = 32

// Log messages of a Server, fixed: alerts may key on them.
const (
	MsgRefusedPeer  = "mrtr runner: connection refused: its peer's uid is not allowed"
	MsgRefusedLimit = "mrtr runner: connection refused: --max-children children run already"
)

// Options configures a Server. Child.Path is required.
type Options struct {
	// Child is the command each connection runs (Path, Args, Supervisor,
	// Dir, the limits). Its Logger is replaced by Logger, with the
	// child's "pid" and the peer's "peer_uid". Its environment is the
	// runner's minus every MRTR_* variable (stdio.Environ), plus
	// Child.Env.
	Child stdio.Config
	// AllowUIDs are the peers' uids allowed to connect. OverflowUID and
	// the runner's own uid are refused even when listed.
	AllowUIDs []uint32
	// AllowAny allows a peer of any uid but those two: the socket's mode
	// and group are then the only control.
	AllowAny bool
	// MaxChildren bounds the children running at once; a connection
	// beyond it is closed at once. Zero or less: DefaultMaxChildren.
	MaxChildren int
	// Logger gets the server's records and the children's stderr. Nil
	// discards them.
	Logger *slog.Logger

	// self is the runner's own uid; zero value: os.Getuid() (a test
	// seam, as the tests run as root: self 0 refuses every peer of theirs).
	self *uint32
}

// Server runs a child for each connection of its listener. Its methods
// are safe for concurrent use.
type Server struct {
	opts    Options
	log     *slog.Logger
	self    uint32
	refused *warnLimit // peers refused
	full    *warnLimit // connections beyond MaxChildren

	mu       sync.Mutex
	ln       net.Listener
	closing  bool
	conns    map[*conn]struct{}
	changed  chan struct{} // closed (and replaced) when conns shrinks
	handlers sync.WaitGroup
}

// conn is one accepted connection and its child.
type conn struct {
	c     *net.UnixConn
	mu    sync.Mutex
	child *stdio.Child // nil until started
}

// New returns a Server for opts. It panics without opts.Child.Path (a
// programmer's error).
func New(opts Options) *Server {
	if opts.Child.Path == "" {
		panic("runner: New without Options.Child.Path")
	}
	if opts.MaxChildren <= 0 {
		opts.MaxChildren = DefaultMaxChildren
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	self := uint32(os.Getuid())
	if opts.self != nil {
		self = *opts.self
	}
	return &Server{opts: opts, log: log, self: self, refused: newWarnLimit(), full: newWarnLimit(),
		conns: map[*conn]struct{}{}, changed: make(chan struct{})}
}

// allowed reports whether a peer of uid may connect.
func (s *Server) allowed(uid uint32) bool {
	if uid == s.self || uid == OverflowUID {
		return false
	}
	return s.opts.AllowAny || slices.Contains(s.opts.AllowUIDs, uid)
}

// ErrServerClosed is Serve's error once Shutdown has begun.
var ErrServerClosed = errors.New("runner: server closed")

// Serve accepts connections on ln until Shutdown, and serves each one
// with a child of its own. It returns ErrServerClosed after Shutdown,
// else the listener's error. It refuses to run where a peer's uid cannot
// be told (outside Linux).
func (s *Server) Serve(ln *net.UnixListener) error {
	if !Supported {
		ln.Close()
		return fmt.Errorf("runner: %w: telling a peer's uid needs SO_PEERCRED (Linux)", errors.ErrUnsupported)
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.ln = ln
	s.mu.Unlock()
	backoff := 5 * time.Millisecond
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of descriptors, most likely: wait, as net/http does.
			s.log.Warn("mrtr runner: accept", "error", err, "retry_in", backoff)
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		s.accept(c)
	}
}

// accept checks the peer of c and the limit, and serves c.
func (s *Server) accept(c *net.UnixConn) {
	uid, err := peerUID(c)
	// Each refusal is logged before the connection is closed: a peer
	// that sees it closed finds it in the log.
	if err != nil {
		s.refused.warn(s.log, MsgRefusedPeer, "error", err)
		c.Close()
		return
	}
	if !s.allowed(uid) {
		why := "not among --allow-uid"
		switch uid {
		case s.self:
			why = "the runner's own uid, which its children share"
		case OverflowUID:
			why = "the overflow uid of a peer without a mapping in this user namespace"
		}
		s.refused.warn(s.log, MsgRefusedPeer, "peer_uid", uid, "why", why)
		c.Close()
		return
	}
	s.mu.Lock()
	if s.closing || len(s.conns) >= s.opts.MaxChildren {
		closing := s.closing
		s.mu.Unlock()
		if !closing {
			s.full.warn(s.log, MsgRefusedLimit, "peer_uid", uid, "max_children", s.opts.MaxChildren)
		}
		c.Close()
		return
	}
	cn := &conn{c: c}
	s.conns[cn] = struct{}{}
	s.handlers.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.handlers.Done()
		defer s.forget(cn)
		s.serveConn(cn, uid)
	}()
}

// forget drops cn from the open connections.
func (s *Server) forget(cn *conn) {
	s.mu.Lock()
	delete(s.conns, cn)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// serveConn runs a child for cn and relays until either ends.
func (s *Server) serveConn(cn *conn, uid uint32) {
	defer cn.c.Close()
	// The child starts with the peer's first message: a connection that
	// closes before it (the proxy's check that the runner is there)
	// starts none.
	br := bufio.NewReaderSize(cn.c, readBufBytes)
	if _, err := br.Peek(1); err != nil {
		return
	}
	cfg := s.opts.Child
	cfg.Logger = s.log.With("peer_uid", uid)
	ch, err := stdio.Start(cfg)
	if err != nil {
		s.log.Warn("mrtr runner: the command did not start", "peer_uid", uid, "error", err)
		return
	}
	cn.mu.Lock()
	cn.child = ch
	cn.mu.Unlock()
	s.log.Debug("mrtr runner: child started", "pid", ch.Pid(), "peer_uid", uid)

	// The child's messages to the peer, until the child's stdout ends;
	// then the connection is closed, which ends the relay the other way.
	out := make(chan struct{})
	go func() {
		defer close(out)
		broken := false
		for msg := range ch.Recv() {
			if broken {
				continue // drained, so the child is never blocked on us
			}
			if _, err := cn.c.Write(append(msg, '\n')); err != nil {
				// The peer is gone: stop the child now, even if the relay
				// the other way is blocked in a Send it does not read.
				broken = true
				cn.c.Close()
				go ch.Stop(context.Background())
			}
		}
		// Closed once the child is reaped: a peer that sees the end
		// knows the child is gone (Conn.Close waits for it).
		<-ch.Done()
		cn.c.Close()
	}()
	// The peer's messages to the child, until the connection ends.
	max := cfg.MaxMessageBytes
	if max <= 0 {
		max = stdio.DefaultMaxMessageBytes
	}
	err = readLines(br, max, func(line []byte) error { return ch.Send(line) })
	if errors.Is(err, errLineTooLong) {
		s.log.Warn("mrtr runner: the peer sent a line over the message limit: connection closed", "peer_uid", uid, "pid", ch.Pid(), "max_message_bytes", max)
		cn.c.Close()
	}
	// The connection ended (or the child's stdin did: it exited): the
	// child is stopped, and what it writes until it ends still reaches
	// the peer; the relay above closes the connection then.
	_ = ch.Stop(context.Background())
	<-out
	s.log.Debug("mrtr runner: child ended", "pid", ch.Pid(), "peer_uid", uid, "exit", exitOf(ch.Err()))
}

// exitOf says how a child ended.
func exitOf(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// readBufBytes is the read buffer of a connection.
const readBufBytes = 64 << 10

// errLineTooLong is readLines's error for a line over its limit.
var errLineTooLong = errors.New("runner: line over the message limit")

// readLines hands each non-empty line of r, without its line ending, to
// each, holding at most about max bytes of one line, until r ends, a line
// is longer than max (errLineTooLong) or each fails. An unterminated
// last line is dropped, as stdio drops one.
func readLines(r io.Reader, max int, each func([]byte) error) error {
	br := bufio.NewReaderSize(r, readBufBytes) // r itself when it is a big enough *bufio.Reader
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > max+2 { // "\r\n" not counted
			return errLineTooLong
		}
		switch {
		case err == nil:
			msg := append(line, frag...)
			line = nil
			msg = bytes.TrimSuffix(bytes.TrimSuffix(msg, []byte("\n")), []byte("\r"))
			if len(msg) > max {
				return errLineTooLong
			}
			if len(bytes.TrimSpace(msg)) == 0 {
				continue
			}
			if err := each(msg); err != nil {
				return err
			}
		case errors.Is(err, bufio.ErrBufferFull):
			line = append(line, frag...)
		default:
			return err
		}
	}
}

// Shutdown stops accepting (the listener is closed, its socket file
// removed) and waits for the open connections to end. When ctx ends
// first, the children left are stopped at once (SIGKILL of their groups,
// their supervisors first), and Shutdown returns ctx.Err() once they are
// reaped.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	if s.ln != nil {
		s.ln.Close()
	}
	s.mu.Unlock()
	for {
		s.mu.Lock()
		n, changed := len(s.conns), s.changed
		s.mu.Unlock()
		if n == 0 {
			s.handlers.Wait()
			return nil
		}
		select {
		case <-changed:
			continue
		case <-ctx.Done():
		}
		break
	}
	s.mu.Lock()
	left := make([]*conn, 0, len(s.conns))
	for cn := range s.conns {
		left = append(left, cn)
	}
	s.mu.Unlock()
	done, cancel := context.WithCancel(context.Background())
	cancel() // no grace: stop at once
	var wg sync.WaitGroup
	for _, cn := range left {
		cn.c.Close()
		cn.mu.Lock()
		ch := cn.child
		cn.mu.Unlock()
		if ch != nil {
			wg.Go(func() { _ = ch.Stop(done) })
		}
	}
	wg.Wait()
	s.handlers.Wait()
	return ctx.Err()
}

// Running is how many children run (connections being served).
func (s *Server) Running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// warnLimit rate-limits one kind of warning: warnBurst at once, then one
// a second; the ones dropped are counted in the next one logged.
type warnLimit struct {
	mu      sync.Mutex
	tokens  float64
	last    time.Time
	dropped int
}

// warnBurst is how many warnings of a kind are logged at once.
const warnBurst = 5

func newWarnLimit() *warnLimit { return &warnLimit{tokens: warnBurst} }

func (w *warnLimit) warn(log *slog.Logger, msg string, args ...any) {
	w.mu.Lock()
	now := time.Now()
	if !w.last.IsZero() {
		w.tokens = min(warnBurst, w.tokens+now.Sub(w.last).Seconds())
	}
	w.last = now
	if w.tokens < 1 {
		w.dropped++
		w.mu.Unlock()
		return
	}
	w.tokens--
	dropped := w.dropped
	w.dropped = 0
	w.mu.Unlock()
	if dropped > 0 {
		args = append(args, "suppressed", dropped)
	}
	log.Warn(msg, args...)
}
