package redisstore

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// NewFromURL configures the client from the URL, and to honour context
// deadlines on the socket.
func TestNewFromURLOptions(t *testing.T) {
	for _, tc := range []struct {
		url            string
		addr, user, pw string
		db             int
		tls            bool
	}{
		{url: "redis://localhost", addr: "localhost:6379"},
		{url: "redis://:pw@10.0.0.1:6380/3", addr: "10.0.0.1:6380", pw: "pw", db: 3},
		{url: "rediss://app:pw@redis.example:6390/1", addr: "redis.example:6390", user: "app", pw: "pw", db: 1, tls: true},
	} {
		s, err := NewFromURL(tc.url, nil)
		if err != nil {
			t.Fatalf("NewFromURL(%q) = %v", tc.url, err)
		}
		o := s.client.(*redis.Client).Options()
		if o.Addr != tc.addr || o.Username != tc.user || o.Password != tc.pw || o.DB != tc.db ||
			(o.TLSConfig != nil) != tc.tls || !o.ContextTimeoutEnabled || !s.owned {
			t.Errorf("NewFromURL(%q): addr %q user %q db %d tls %v contextTimeout %v owned %v",
				tc.url, o.Addr, o.Username, o.DB, o.TLSConfig != nil, o.ContextTimeoutEnabled, s.owned)
		}
		if tc.tls && o.TLSConfig.ServerName != "redis.example" {
			t.Errorf("TLS ServerName = %q", o.TLSConfig.ServerName)
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}
}
