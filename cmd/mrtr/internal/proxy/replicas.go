package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/audit"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/node"
	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/internal/peers"
	mrtrproxy "github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/replay/redisstore"
	"github.com/mrtr-go/mrtr/reqstate"
)

// replicaFlags registers --advertise.
func replicaFlags(f *base.Flags, c *Config) {
	f.String(base.GroupListen, &c.Advertise, "advertise", "",
		"`URL` at which the other replicas reach this proxy's /mcp to forward resumes of the calls it holds (only with a bridged upstream and a Redis --replay); empty: http://ADDR/mcp, refused when --addr listens on every interface")
	f.Check("advertise", func() error {
		if c.Advertise == "" {
			return nil
		}
		u, err := url.Parse(c.Advertise)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return base.FlagErr("advertise", "%s is not an http:// or https:// URL", node.RedactURL(c.Advertise))
		}
		return nil
	})
}

// replicaSet is this proxy among its replicas: its node id, the proxy's
// Peers, and the directory, advertised once the listener is open.
type replicaSet struct {
	node  string
	store *redisstore.Store
	dir   atomic.Pointer[peers.Directory]
}

// newReplicaSet returns the replicas of a proxy whose single-use store is
// Redis, or nil (one process: every resume is served where it arrives).
func newReplicaSet(store *redisstore.Store) *replicaSet {
	if store == nil {
		return nil
	}
	return &replicaSet{node: peers.NewNode(), store: store}
}

// checkAdvertise refuses a default advertised URL no other replica could
// reach: --addr without a host, or with a wildcard one.
func checkAdvertise(addr, advertise string) error {
	if advertise != "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return base.FlagErr("addr", "%s is not HOST:PORT", addr)
	}
	if ip := net.ParseIP(strings.Trim(host, "[]")); host == "" || (ip != nil && ip.IsUnspecified()) {
		if port == "" || port == "0" {
			port = "PORT" // the port the listener gets, unknown yet
		}
		return base.FlagErr("advertise", "is needed with --addr %s (every interface) when replicas are on (a bridged upstream and a Redis --replay): "+
			"set it to the URL the other replicas reach this proxy at, like --advertise http://10.0.0.5:%s/mcp with this host's address", addr, port)
	}
	return nil
}

// advertiseIgnored is the warning for an --advertise that does nothing:
// the upstream is not bridged, or the store is not Redis.
const advertiseIgnored = "mrtr proxy: --advertise is ignored: replicas forward resumes only for a bridged (2025-11-25) upstream with a Redis --replay"

// loopbackAdvertise is the warning for a default advertised URL on a
// loopback --addr, or "": the other replicas reach it only when they all
// run on this host.
func loopbackAdvertise(addr, advertise string) string {
	if advertise != "" {
		return ""
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(strings.Trim(host, "[]")); (ip != nil && ip.IsLoopback()) || strings.EqualFold(host, "localhost") {
		return "mrtr proxy: replicas on with a loopback --addr and no --advertise: the other replicas reach this one only if they run on this host; " +
			"on several hosts, listen on an address they reach and set --advertise to it"
	}
	return ""
}

// advertiseURL is --advertise, or http://HOST:PORT/mcp of --addr with the
// port the listener got (--addr HOST:0 picks one).
func advertiseURL(addr, advertise string, bound net.Addr) string {
	if advertise != "" {
		return advertise
	}
	host, port, _ := net.SplitHostPort(addr)
	if tcp, ok := bound.(*net.TCPAddr); ok {
		port = fmt.Sprint(tcp.Port)
	}
	return "http://" + net.JoinHostPort(host, port) + "/mcp"
}

// peersOf is the proxy's Peers: a guard of the same codec and policy as
// guard without its store, whose refusals (only) reach the metrics, and a
// Locate through the directory.
func (rs *replicaSet) peersOf(codec reqstate.Codec, guard *mrtr.Guard, obs mrtr.Observer) *mrtrproxy.Peers {
	p := guard.Policy()
	p.Store = nil
	if p.Leeway == 0 {
		p.Leeway = -1 // none, as the guard was told
	}
	p.Observer = nil
	if obs != nil {
		p.Observer = refusalsOnly{obs}
	}
	var gone func(context.Context)
	if p.Auditor != nil {
		fa := &forwardAudit{refusals: auditRefusalsOnly{p.Auditor}, next: p.Auditor, accepted: map[context.Context]mrtr.ResumeEvent{}} // audit.go
		p.Auditor, gone = fa, fa.gone
	}
	return &mrtrproxy.Peers{Guard: mrtr.New(codec, &p), Locate: rs.locate, Node: rs.node, Gone: gone}
}

// reasonHolderGone is the reason of the rejected line of a resume this
// replica answered "start over" because the replica holding its call is
// gone.
const reasonHolderGone mrtr.Outcome = "holder_gone"

// forwardAudit is the Auditor of the replicas' first check of a resume:
// the refusals there (auditRefusalsOnly), and a rejected line with reason
// holder_gone for a resume it accepted whose holder turns out gone
// (Peers.Gone): the holder records nothing of it then. Safe for
// concurrent use.
type forwardAudit struct {
	refusals auditRefusalsOnly
	next     mrtr.Auditor

	mu       sync.Mutex
	accepted map[context.Context]mrtr.ResumeEvent // by request, until it ends
}

func (a *forwardAudit) Resumed(ctx context.Context, e mrtr.ResumeEvent) error {
	if e.Outcome == mrtr.OutcomeOK {
		a.mu.Lock()
		a.accepted[ctx] = e
		a.mu.Unlock()
		context.AfterFunc(ctx, func() { a.take(ctx) })
	}
	return a.refusals.Resumed(ctx, e)
}

func (a *forwardAudit) Paused(ctx context.Context, e mrtr.PauseEvent) error {
	return a.refusals.Paused(ctx, e)
}

func (a *forwardAudit) Ended(ctx context.Context, e mrtr.EndEvent) error {
	return a.refusals.Ended(ctx, e)
}

// take returns and forgets the accepted resume of the request ctx.
func (a *forwardAudit) take(ctx context.Context) (mrtr.ResumeEvent, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.accepted[ctx]
	delete(a.accepted, ctx)
	return e, ok
}

// gone is Peers.Gone: the resume of ctx, accepted here, is answered
// "start over"; it is recorded as rejected, holder_gone.
func (a *forwardAudit) gone(ctx context.Context) {
	if e, ok := a.take(ctx); ok {
		e.Outcome = reasonHolderGone
		_ = a.next.Resumed(ctx, e) // a write that fails is logged and counted by the writer
	}
}

// tagForwarded marks the requests another replica forwarded here (the
// proxy's ForwardedHeader naming a replica the directory knows), so that
// their audit lines say which one (forwarded_by).
func (rs *replicaSet) tagForwarded(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if node := r.Header.Get(mrtrproxy.ForwardedHeader); node != "" && node != rs.node && validNode(node) {
			if d := rs.dir.Load(); d != nil {
				if _, err := d.Lookup(r.Context(), node); err == nil {
					r = r.WithContext(audit.WithForwardedBy(r.Context(), node))
				}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// validNode reports whether s can be a replica's node id.
func validNode(s string) bool {
	return len(s) <= 64 && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") == ""
}

// locate is Peers.Locate: nil for a call held here (or no bridge state),
// the holder's advertised URL, or proxy.ErrHolderGone.
func (rs *replicaSet) locate(ctx context.Context, state string) (*url.URL, error) {
	node, ok := bridge.HolderOf(state)
	if !ok || node == rs.node {
		return nil, nil
	}
	d := rs.dir.Load()
	if d == nil {
		return nil, errors.New("the directory of replicas is not started yet")
	}
	raw, err := d.Lookup(ctx, node)
	switch {
	case errors.Is(err, peers.ErrUnknown):
		return nil, mrtrproxy.ErrHolderGone
	case err != nil:
		return nil, err
	}
	return url.Parse(raw)
}

// start advertises this replica at its URL, once its listener is open,
// in an entry sealed by the replicas' codec for serverID: a writer of the
// Redis keys without the key ring cannot redirect forwarded resumes.
func (rs *replicaSet) start(ctx context.Context, log *slog.Logger, advertise string, codec reqstate.Codec, serverID string) error {
	d, err := peers.New(rs.store.Client(), rs.node, advertise, &peers.Options{Prefix: rs.store.Prefix(), Logger: log, Codec: codec, ServerID: serverID})
	if err != nil {
		return fmt.Errorf("--advertise: %w", err)
	}
	rs.dir.Store(d)
	if err := d.Start(ctx); err != nil {
		log.Warn("mrtr proxy: cannot advertise this replica yet; resumes other replicas forward to it fail until it can", "error", err)
	}
	shown := advertise
	if u, err := url.Parse(advertise); err == nil {
		shown = u.Redacted()
	}
	log.Info("mrtr proxy: replicas on: a resume of a call another replica holds is forwarded to it, checked there again",
		"node", rs.node, "advertise", shown, "directory_ttl", peers.DefaultTTL)
	return nil
}

// stop withdraws this replica from the directory.
func (rs *replicaSet) stop() {
	if d := rs.dir.Load(); d != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = d.Close(ctx)
	}
}

// refusalsOnly passes on the refusals of the replicas' first check, so a
// token refused before forwarding is counted; its accepted resumes are
// counted by the holder, whose full guard decides them.
type refusalsOnly struct{ next mrtr.Observer }

func (r refusalsOnly) Resumed(ctx context.Context, e mrtr.ResumeEvent) {
	if e.Outcome != mrtr.OutcomeOK {
		r.next.Resumed(ctx, e)
	}
}
func (refusalsOnly) Paused(context.Context, mrtr.PauseEvent)      {}
func (refusalsOnly) StoreCalled(context.Context, mrtr.StoreEvent) {}
func (refusalsOnly) Ended(context.Context, mrtr.EndEvent)         {}
