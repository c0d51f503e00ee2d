package redisstore_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/testing/testredis"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/replay/redisstore"
)

// leakPasswords each hold one of the characters that a URL gives a meaning
// to, so that written unencoded they end up in the port, the path, the
// query or a fragment (issue 18, item 8).
var leakPasswords = []string{
	"Sup3rS3cret/Kq8x",
	"Sup3rS3cret#Kq8x",
	"Sup3rS3cret?Kq8x",
	"Sup3rS3cret@Kq8x",
	"Sup3rS3cret%Kq8x",
	"Sup3r%2FS3cret",
	"7913/Kq8xWv2z",          // the part before the '/' is a valid port
	"7913#Kq8xWv2z",          // ... before the '#'
	"7913?Kq8xWv2z=1",        // ... before the '?'
	"Zt5r/9Wq#Lm3?Hp7@Xc%Yb", // all of them
}

// leaks reports the first part of secret longer than three characters, in
// any of the ways a URL can spell it, that msg contains.
func leaks(msg, secret string) string {
	for _, s := range []string{secret, url.QueryEscape(secret), url.PathEscape(secret), url.UserPassword("", secret).String()} {
		for i := 0; i+4 <= len(s); i++ {
			if part := s[i : i+4]; strings.Contains(msg, part) {
				return part
			}
		}
	}
	return ""
}

// mustRefuse reports whether the URL form with pw written in it unencoded
// cannot be right. A query value may hold '/', '?' and '@'; user
// information, an '@' (the last '@' ends it). A valid %-escape is taken
// for one.
func mustRefuse(form, pw string) bool {
	if _, err := url.QueryUnescape(strings.ReplaceAll(pw, "+", "%2B")); err != nil || strings.Contains(pw, "#") {
		return true
	}
	if strings.Contains(form, "password=PASSWORD") {
		return false
	}
	return strings.ContainsAny(pw, "/?")
}

// urlForms are the URL forms NewFromURL takes, with PASSWORD where the
// password goes, unencoded.
var urlForms = []string{
	"redis://:PASSWORD@host:6379/0",
	"redis://app:PASSWORD@host:6379/0",
	"rediss://app:PASSWORD@host:6379/0",
	"unix://:PASSWORD@/run/redis.sock?db=0",
	"redis://:PASSWORD@sentinel1:26379/0?master_name=m&addr=sentinel2:26379",
	"rediss://:PASSWORD@sentinel1:26379/0?master_name=m",
	"redis://sentinel1:26379/0?master_name=m&password=PASSWORD",
	"redis://sentinel1:26379/0?master_name=m&addr=sentinel2:26379&password=PASSWORD&dial_timeout=1s",
	"redis-cluster://:PASSWORD@node1:7000?addr=node2:7001",
	"rediss-cluster://app:PASSWORD@node1:7000",
}

// No error of NewFromURL contains any text of a password: neither a
// password written unencoded (where net/url or go-redis quote the part they
// refuse), nor one written encoded, in the user information (%2F and the
// like) or in a password= value, in a URL that is wrong elsewhere.
func TestNewFromURLErrorsHidePasswords(t *testing.T) {
	check := func(t *testing.T, rawURL, pw string, wantErr bool) {
		t.Helper()
		s, err := redisstore.NewFromURL(rawURL, nil)
		if err == nil {
			s.Close()
			if wantErr {
				t.Errorf("NewFromURL(%q) succeeded, want an error", rawURL)
			}
			return
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "redisstore: ") {
			t.Errorf("NewFromURL(%q) = %q, want a redisstore error", rawURL, msg)
		}
		if part := leaks(msg, pw); part != "" {
			t.Errorf("NewFromURL(%q) = %q: contains %q of the password", rawURL, msg, part)
		}
	}
	for _, form := range urlForms {
		for _, pw := range leakPasswords {
			// Unencoded: each of these must be refused, since the
			// password's special character breaks the URL (or moves part
			// of the password into the host, path, query or fragment).
			check(t, strings.ReplaceAll(form, "PASSWORD", pw), pw, mustRefuse(form, pw))
			// Encoded as it must be, in a URL broken by an option
			// whose value, or whose name, is the password.
			enc := url.QueryEscape(pw)
			if strings.Contains(form, "@") {
				enc = url.PathEscape(pw)
			}
			good := strings.ReplaceAll(form, "PASSWORD", enc)
			join := "?"
			if strings.Contains(good, "?") {
				join = "&"
			}
			for _, bad := range []string{
				"dial_timeout=" + url.QueryEscape(pw),
				"pool_size=" + url.QueryEscape(pw),
				"skip_verify=" + url.QueryEscape(pw),
				url.QueryEscape(pw) + "=1",
				"addr=" + url.QueryEscape(pw),
				"db=" + url.QueryEscape(pw),
			} {
				check(t, good+join+bad, pw, true)
			}
			check(t, good+"#"+url.QueryEscape(pw), pw, true)
		}
	}
}

// Errors from a server a store reaches with the wrong password, written
// encoded in the user information, contain no part of it.
func TestErrorsHideWrongPassword(t *testing.T) {
	srv := testredis.StartServer(t)
	raw := newClient(t, srv.URL())
	const user = "mrtr-leak"
	if err := raw.Do(t.Context(), "ACL", "SETUSER", user, "on", ">the-right-one", "~*", "+@all").Err(); err != nil {
		testredis.Unsupported(t, "ACL SETUSER: %v", err)
	}
	for _, pw := range leakPasswords {
		store := newStore(t, "redis://"+user+":"+url.PathEscape(pw)+"@"+srv.Addr()+"/0", &redisstore.Options{Timeout: bound})
		for name, f := range map[string]func() error{
			"Ping":    func() error { return store.Ping(t.Context()) },
			"Reserve": func() error { _, err := store.Reserve(t.Context(), newID(), time.Now().Add(time.Hour)); return err },
		} {
			err := f()
			if err == nil || errors.Is(err, replay.ErrReplayed) {
				t.Fatalf("%s with a wrong password = %v, want an error", name, err)
			}
			if part := leaks(err.Error(), pw); part != "" {
				t.Errorf("%s with a wrong password = %q: contains %q of it", name, err, part)
			}
		}
	}
}
