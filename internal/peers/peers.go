// Package peers is the directory through which replicas of `mrtr proxy`
// find each other: each process advertises the URL it serves MCP at under
// its node id, on the Redis deployment of its single-use store, with a
// short expiry it keeps refreshing. A resume that reaches a replica other
// than the one holding its call is forwarded to the URL the directory
// gives for the holder's node (package proxy, Options.Peers).
//
// Liveness is the expiry: a process that stops cleanly deletes its entry
// (Close); one that is killed or frozen (SIGSTOP) stops refreshing, and
// its entry expires within TTL. A node id is fresh for every process
// (NewNode), so a restarted proxy never answers for its predecessor's
// held calls, which died with it.
//
// With Options.Codec (what `mrtr proxy` sets: the replicas' shared key
// ring), each entry is sealed by the codec, bound to its node and the
// server id, and expires with it: whoever can write the directory's keys
// in Redis but holds no key of the ring cannot make a replica forward a
// resume, and the caller's credentials with it, anywhere but to a URL a
// replica advertised. Without a codec the directory trusts Redis as the
// single-use store does (see SECURITY.md).
package peers

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mrtr-go/mrtr/reqstate"
)

// Defaults of Options.
const (
	// DefaultPrefix starts the directory's keys when Options.Prefix is
	// empty; a key is the prefix, "peer:" and the node id.
	DefaultPrefix = "mrtr:"
	// DefaultTTL is how long an entry lives without a refresh: how soon a
	// killed or frozen replica drops out.
	DefaultTTL = 10 * time.Second
	// DefaultRefresh is how often a replica renews its entry.
	DefaultRefresh = 3 * time.Second
	// DefaultTimeout bounds each call to Redis.
	DefaultTimeout = time.Second
)

// ErrUnknown reports a node that has no live entry: it stopped, was
// killed, froze for longer than the TTL, or never existed.
var ErrUnknown = errors.New("peers: no live replica has that node id")

// Options configures a Directory. The zero value is ready to use.
type Options struct {
	// Prefix starts every key (Prefix + "peer:" + node). Empty means
	// DefaultPrefix. Replicas find each other only under the same prefix.
	Prefix string
	// TTL is the expiry of an entry. Zero means DefaultTTL.
	TTL time.Duration
	// Refresh is the interval between renewals; it should be well below
	// TTL. Zero means DefaultRefresh, or TTL/3 when that is shorter.
	Refresh time.Duration
	// Timeout bounds each call to Redis. Zero means DefaultTimeout.
	Timeout time.Duration
	// Logger receives a line when advertising starts failing and when it
	// works again. Nil means none.
	Logger *slog.Logger
	// Codec, when set, seals every entry (and opens every entry looked
	// up): bound to the node, ServerID and the directory, valid for TTL.
	// An entry it cannot open is refused (ErrForged), never followed. Nil
	// stores plain URLs and trusts whoever can write the keys.
	Codec reqstate.Codec
	// ServerID is bound into sealed entries, as into the replicas' tokens.
	ServerID string
	// Now is the clock of sealed entries. Nil means time.Now.
	Now func() time.Time
}

// ErrForged reports an entry the directory's codec cannot open: not
// sealed by a key of this deployment's ring for that node, or expired.
var ErrForged = errors.New("peers: the replica's entry is not sealed by this deployment's key ring")

// entryBinding binds a sealed entry: it is no MCP request's state, so no
// entry ever opens as a requestState, nor a requestState as an entry.
func (d *Directory) entryBinding(node string) reqstate.Binding {
	return reqstate.Binding{Method: "mrtr/peers", ProtocolVersion: "1", Target: node, ServerID: d.serverID}
}

// value is what advertise stores: the URL, sealed when there is a codec.
func (d *Directory) value() (string, error) {
	if d.codec == nil {
		return d.url, nil
	}
	cont, err := json.Marshal(d.url)
	if err != nil {
		return "", err
	}
	now := d.now()
	return d.codec.Seal(d.entryBinding(d.node), &reqstate.State{Continuation: cont, Round: 1, IssuedAt: now, ExpiresAt: now.Add(d.ttl)})
}

// entryURL reads a stored value of node's entry.
func (d *Directory) entryURL(node, v string) (string, error) {
	if d.codec == nil {
		return v, nil
	}
	st, err := d.codec.Open(d.entryBinding(node), v)
	if err != nil || st.Check(d.now(), d.ttl) != nil {
		return "", ErrForged
	}
	var u string
	if err := json.Unmarshal(st.Continuation, &u); err != nil {
		return "", ErrForged
	}
	return u, nil
}

// Directory is one replica's view of the directory: it advertises its own
// node and looks up the others'. It is safe for concurrent use.
type Directory struct {
	client   redis.UniversalClient
	prefix   string
	node     string
	url      string
	ttl      time.Duration
	refresh  time.Duration
	timeout  time.Duration
	log      *slog.Logger
	codec    reqstate.Codec
	serverID string
	now      func() time.Time

	mu      sync.Mutex
	stop    chan struct{} // closed by Close; nil before Start
	done    chan struct{} // closed when the refresh loop has returned
	closed  bool
	failing bool // the last advertisement failed (for the log)
}

// NewNode returns a fresh random node id: 26 characters of base32 (A-Z,
// 2-7), 130 bits, never the same twice in practice.
func NewNode() string { return rand.Text() }

// New returns the directory on client for node, which serves MCP at
// advertise (an absolute http or https URL). It does not advertise yet:
// Start does. It panics on a nil client, an empty node or a negative
// duration; it returns an error for a URL that is not http(s).
func New(client redis.UniversalClient, node, advertise string, opts *Options) (*Directory, error) {
	if client == nil || node == "" {
		panic("peers: New needs a client and a node")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.TTL < 0 || o.Refresh < 0 || o.Timeout < 0 {
		panic("peers: negative TTL, Refresh or Timeout")
	}
	if err := checkURL(advertise); err != nil {
		return nil, err
	}
	d := &Directory{client: client, prefix: o.Prefix, node: node, url: advertise, ttl: o.TTL, refresh: o.Refresh, timeout: o.Timeout, log: o.Logger,
		codec: o.Codec, serverID: o.ServerID, now: o.Now}
	if d.now == nil {
		d.now = time.Now
	}
	if d.prefix == "" {
		d.prefix = DefaultPrefix
	}
	if d.ttl == 0 {
		d.ttl = DefaultTTL
	}
	if d.refresh == 0 {
		d.refresh = min(DefaultRefresh, d.ttl/3)
	}
	if d.timeout == 0 {
		d.timeout = DefaultTimeout
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	return d, nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("peers: advertised address %q is not an http(s) URL", s)
	}
	return nil
}

// Node returns this replica's node id.
func (d *Directory) Node() string { return d.node }

// URL returns the URL this replica advertises.
func (d *Directory) URL() string { return d.url }

func (d *Directory) key(node string) string { return d.prefix + "peer:" + node }

// Start advertises this replica now and every Refresh until Close. It
// returns the first advertisement's error, if any, for the caller to log;
// the renewals go on either way (Redis may come up later). A second Start
// does nothing.
func (d *Directory) Start(ctx context.Context) error {
	d.mu.Lock()
	if d.stop != nil || d.closed {
		d.mu.Unlock()
		return nil
	}
	d.stop, d.done = make(chan struct{}), make(chan struct{})
	d.mu.Unlock()
	err := d.advertise(ctx)
	go d.loop()
	return err
}

func (d *Directory) loop() {
	defer close(d.done)
	t := time.NewTicker(d.refresh)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			_ = d.advertise(context.Background())
		}
	}
}

// advertise sets this replica's entry for another TTL.
func (d *Directory) advertise(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	v, err := d.value()
	if err == nil {
		err = d.client.Set(ctx, d.key(d.node), v, d.ttl).Err()
	}
	d.mu.Lock()
	was := d.failing
	d.failing = err != nil
	d.mu.Unlock()
	switch {
	case err != nil && !was:
		d.log.Warn("peers: cannot advertise this replica; resumes forwarded to it fail until it can", "node", d.node, "error", err)
	case err == nil && was:
		d.log.Info("peers: advertising this replica again", "node", d.node)
	}
	if err != nil {
		return fmt.Errorf("peers: advertise: %w", err)
	}
	return nil
}

// Lookup returns the URL that node advertises, or ErrUnknown when it has
// no live entry, or ErrForged for an entry the codec cannot open. Any
// other error means the directory could not answer.
func (d *Directory) Lookup(ctx context.Context, node string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	v, err := d.client.Get(ctx, d.key(node)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", ErrUnknown
	case err != nil:
		return "", fmt.Errorf("peers: look up a replica: %w", err)
	}
	if v, err = d.entryURL(node, v); err != nil {
		return "", err
	}
	if checkURL(v) != nil {
		return "", fmt.Errorf("peers: look up a replica: its entry is not an http(s) URL")
	}
	return v, nil
}

// Close stops the renewals and deletes this replica's entry, so that
// resumes of calls it held fail at once instead of being forwarded to a
// process that is gone. ctx bounds the delete.
func (d *Directory) Close(ctx context.Context) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	stop, done := d.stop, d.done
	d.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	if err := d.client.Del(ctx, d.key(d.node)).Err(); err != nil {
		return fmt.Errorf("peers: withdraw this replica: %w", err)
	}
	return nil
}
