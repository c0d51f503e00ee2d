package peers_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mrtr-go/mrtr/internal/peers"
	"github.com/mrtr-go/mrtr/internal/testing/testredis"
	"github.com/mrtr-go/mrtr/reqstate"
)

func client(t *testing.T, url string) redis.UniversalClient {
	t.Helper()
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	o.ContextTimeoutEnabled = true
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

func newDir(t *testing.T, c redis.UniversalClient, node, url string, o *peers.Options) *peers.Directory {
	t.Helper()
	d, err := peers.New(c, node, url, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	return d
}

// TestAdvertiseLookupClose: a started replica is found under its node with
// an expiry of at most the TTL (the liveness of a killed or frozen one);
// a closed one, or one never started, is unknown at once.
func TestAdvertiseLookupClose(t *testing.T) {
	url := testredis.Start(t)
	ctx := t.Context()
	c := client(t, url)
	prefix := "mrtr:test:" + peers.NewNode()[:8] + ":"
	a := newDir(t, c, peers.NewNode(), "http://10.0.0.1:8080/mcp", &peers.Options{Prefix: prefix, TTL: 10 * time.Second})
	b := newDir(t, c, peers.NewNode(), "http://10.0.0.2:8080/mcp", &peers.Options{Prefix: prefix})
	if _, err := b.Lookup(ctx, a.Node()); !errors.Is(err, peers.ErrUnknown) {
		t.Fatalf("a replica not started: Lookup = %v, want ErrUnknown", err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := b.Lookup(ctx, a.Node())
	if err != nil || got != "http://10.0.0.1:8080/mcp" {
		t.Fatalf("Lookup = %q, %v", got, err)
	}
	key := prefix + "peer:" + a.Node()
	if ttl := c.PTTL(ctx, key).Val(); ttl <= 0 || ttl > 10*time.Second {
		t.Fatalf("PTTL of %s = %v, want at most the TTL", key, ttl)
	}
	other := newDir(t, c, a.Node(), "http://10.0.0.3:8080/mcp", &peers.Options{Prefix: "mrtr:test:other:"})
	if _, err := other.Lookup(ctx, a.Node()); !errors.Is(err, peers.ErrUnknown) {
		t.Fatalf("another prefix sees the entry: %v", err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lookup(ctx, a.Node()); !errors.Is(err, peers.ErrUnknown) {
		t.Fatalf("a closed replica: Lookup = %v, want ErrUnknown", err)
	}
	if err := a.Start(ctx); err != nil || c.Exists(ctx, key).Val() != 0 {
		t.Fatalf("Start after Close advertised again (%v)", err)
	}
}

// TestRefreshed: the renewals keep an entry alive past its TTL.
func TestRefreshed(t *testing.T) {
	url := testredis.Start(t)
	ctx := t.Context()
	c := client(t, url)
	prefix := "mrtr:test:" + peers.NewNode()[:8] + ":"
	a := newDir(t, c, peers.NewNode(), "http://10.0.0.1:8080/mcp", &peers.Options{Prefix: prefix, TTL: time.Hour, Refresh: 10 * time.Millisecond})
	key := prefix + "peer:" + a.Node()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Shorten the entry's life; a renewal must bring it back to an hour.
	c.PExpire(ctx, key, time.Minute)
	for deadline := time.Now().Add(30 * time.Second); c.PTTL(ctx, key).Val() <= time.Minute; {
		if time.Now().After(deadline) {
			t.Fatal("the entry was not renewed within 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRedisDown: a directory that cannot answer is an error, never
// ErrUnknown (which would tell a client its call is gone).
func TestRedisDown(t *testing.T) {
	srv := testredis.StartServer(t)
	c := client(t, srv.URL())
	a := newDir(t, c, peers.NewNode(), "http://10.0.0.1:8080/mcp", &peers.Options{Timeout: 200 * time.Millisecond})
	srv.Stop()
	if err := a.Start(t.Context()); err == nil {
		t.Fatal("Start with Redis down: no error")
	}
	if _, err := a.Lookup(t.Context(), "X"); err == nil || errors.Is(err, peers.ErrUnknown) {
		t.Fatalf("Lookup with Redis down = %v, want an error other than ErrUnknown", err)
	}
}

// TestBadURL: only http(s) URLs are advertised.
func TestBadURL(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, u := range []string{"", "10.0.0.1:8080", "ftp://h/mcp", "http:///mcp"} {
		if _, err := peers.New(c, "n", u, nil); err == nil {
			t.Errorf("New accepted %q", u)
		}
	}
}

func codec(t *testing.T) *reqstate.AESGCM {
	t.Helper()
	ring, err := reqstate.GenerateKeyRing("peers", rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return reqstate.New(ring, nil)
}

// TestSealedEntries: with a codec, only an entry a replica of the same
// key ring and server id sealed for that node, and not expired, is
// followed. A Redis writer without the ring cannot redirect a forwarded
// resume (and the caller's credentials with it): a plain URL, an entry
// moved from another node's key, one sealed under another ring or for
// another server id, and an old one kept past its life are all refused.
func TestSealedEntries(t *testing.T) {
	url := testredis.Start(t)
	ctx := t.Context()
	c := client(t, url)
	prefix := "mrtr:test:" + peers.NewNode()[:8] + ":"
	ring := codec(t)
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	opts := func(cd reqstate.Codec, server string) *peers.Options {
		// No renewal during the test: it writes the keys itself.
		return &peers.Options{Prefix: prefix, Codec: cd, ServerID: server, Now: clock, TTL: 10 * time.Second, Refresh: time.Hour}
	}
	a := newDir(t, c, peers.NewNode(), "http://10.0.0.1:8080/mcp", opts(ring, "prod"))
	b := newDir(t, c, peers.NewNode(), "http://10.0.0.2:8080/mcp", opts(ring, "prod"))
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Lookup(ctx, a.Node()); err != nil || got != "http://10.0.0.1:8080/mcp" {
		t.Fatalf("Lookup of a sealed entry = %q, %v", got, err)
	}
	keyA := prefix + "peer:" + a.Node()
	sealed := c.Get(ctx, keyA).Val()
	if strings.Contains(sealed, "10.0.0.1") {
		t.Fatalf("the entry carries its URL in the clear: %q", sealed)
	}

	forged := func(what, node string) {
		t.Helper()
		if got, err := b.Lookup(ctx, node); !errors.Is(err, peers.ErrForged) || got != "" {
			t.Fatalf("%s: Lookup = %q, %v, want ErrForged", what, got, err)
		}
	}
	c.Set(ctx, keyA, "http://attacker.example/mcp", time.Minute)
	forged("a plain URL written into Redis", a.Node())

	other := peers.NewNode()
	c.Set(ctx, prefix+"peer:"+other, sealed, time.Minute)
	forged("a's entry under another node's key", other)

	alien := newDir(t, c, a.Node(), "http://attacker.example/mcp", opts(codec(t), "prod"))
	if err := alien.Start(ctx); err != nil {
		t.Fatal(err)
	}
	forged("an entry sealed under another key ring", a.Node())
	alien.Close(ctx)

	otherServer := newDir(t, c, a.Node(), "http://attacker.example/mcp", opts(ring, "staging"))
	if err := otherServer.Start(ctx); err != nil {
		t.Fatal(err)
	}
	forged("an entry sealed for another server id", a.Node())
	otherServer.Close(ctx)

	c.Set(ctx, keyA, sealed, time.Minute)
	if _, err := b.Lookup(ctx, a.Node()); err != nil {
		t.Fatalf("the genuine entry put back: %v", err)
	}
	now = now.Add(21 * time.Second) // past its expiry and the TTL's leeway
	forged("a genuine entry kept past its life", a.Node())
}

// TestLookupRefusesOtherSchemes: an entry that is not an http(s) URL with
// a host (written into Redis by whoever can, without a codec) is never
// followed: a forwarded resume carries the caller's credentials.
func TestLookupRefusesOtherSchemes(t *testing.T) {
	url := testredis.Start(t)
	ctx := t.Context()
	c := client(t, url)
	prefix := "mrtr:test:" + peers.NewNode()[:8] + ":"
	b := newDir(t, c, peers.NewNode(), "http://10.0.0.2:8080/mcp", &peers.Options{Prefix: prefix})
	node := peers.NewNode()
	for _, v := range []string{"file:///etc/mrtr/keys.json", "ftp://10.0.0.1/mcp", "unix:///run/mrtr.sock", "http:///mcp", "10.0.0.1:8080", ""} {
		c.Set(ctx, prefix+"peer:"+node, v, time.Minute)
		got, err := b.Lookup(ctx, node)
		if err == nil || got != "" || errors.Is(err, peers.ErrUnknown) {
			t.Errorf("an entry %q: Lookup = %q, %v; want an error other than ErrUnknown", v, got, err)
		}
	}
	c.Set(ctx, prefix+"peer:"+node, "https://10.0.0.1/mcp", time.Minute)
	if got, err := b.Lookup(ctx, node); err != nil || got != "https://10.0.0.1/mcp" {
		t.Fatalf("an https entry: Lookup = %q, %v", got, err)
	}
}
