package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/redis/go-redis/v9"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/internal/testing/testredis"
)

// TestAuthHS256 pins the development mode through the command's own
// wiring: a bearer JWT under the secret, HS256 only, sub and exp required,
// and the principal handed to go-sdk as TokenInfo (UserID = sub,
// Extra["iss"] = iss).
func TestAuthHS256(t *testing.T) {
	c := &AuthConfig{hs256: testcmd.DevSecret}
	if err := c.check(); err != nil {
		t.Fatal(err)
	}
	v, err := c.Verifier(t.Context(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	var got *auth.TokenInfo
	h := protect(v, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = auth.TokenInfoFromContext(r.Context())
	}), http.NewServeMux(), func(h http.Handler) http.Handler { return h })
	exp := time.Now().Add(time.Hour).Unix()
	for _, tc := range []struct {
		name, auth string
		want       int
	}{
		{"none", "", 401},
		{"garbage", "Bearer abc", 401},
		{"good", "Bearer " + testcmd.SignJWT(t, testcmd.DevSecret, jwt.MapClaims{"sub": "alice", "iss": "me", "exp": exp}, jwt.SigningMethodHS256), 200},
		{"wrong secret", "Bearer " + testcmd.SignJWT(t, strings.Repeat("x", 32), jwt.MapClaims{"sub": "alice", "exp": exp}, jwt.SigningMethodHS256), 401},
		{"expired", "Bearer " + testcmd.SignJWT(t, testcmd.DevSecret, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(-time.Hour).Unix()}, jwt.SigningMethodHS256), 401},
		{"no exp", "Bearer " + testcmd.SignJWT(t, testcmd.DevSecret, jwt.MapClaims{"sub": "alice"}, jwt.SigningMethodHS256), 401},
		{"no sub", "Bearer " + testcmd.SignJWT(t, testcmd.DevSecret, jwt.MapClaims{"exp": exp}, jwt.SigningMethodHS256), 401},
		{"HS512", "Bearer " + testcmd.SignJWT(t, testcmd.DevSecret, jwt.MapClaims{"sub": "alice", "exp": exp}, jwt.SigningMethodHS512), 401},
	} {
		got = nil
		r := httptest.NewRequest("POST", "/mcp", nil)
		if tc.auth != "" {
			r.Header.Set("Authorization", tc.auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, w.Code, tc.want)
		}
		if tc.want == 401 && !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer ") {
			t.Errorf("%s: no WWW-Authenticate challenge", tc.name)
		}
		if tc.want == 200 && (got == nil || got.UserID != "alice" || got.Extra["iss"] != "me") {
			t.Errorf("%s: TokenInfo %+v", tc.name, got)
		}
	}
}

func TestLimitListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(ln, 1)
	defer l.Close()
	go func() {
		for range 2 {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err == nil {
				defer c.Close()
			}
		}
		select {}
	}()
	a, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	select {
	case <-accepted:
		t.Fatal("a second connection accepted while one is open")
	case <-time.After(100 * time.Millisecond):
	}
	a.Close()
	a.Close() // a second close frees nothing more
	b := <-accepted
	if b == nil || l.open() != 1 {
		t.Fatalf("after a close: %v, open %d", b, l.open())
	}
	b.Close()
	l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
}

// TestListenURL: the logged URL keeps the host --addr gave (a container's
// 0.0.0.0:8080 is not logged as [::]:8080) with the port the listener got.
func TestListenURL(t *testing.T) {
	for _, c := range []struct{ given, listen, want string }{
		{"0.0.0.0:0", "0.0.0.0:0", "http://0.0.0.0:PORT/mcp"},
		{"127.0.0.1:0", "127.0.0.1:0", "http://127.0.0.1:PORT/mcp"},
		{"localhost:0", "127.0.0.1:0", "http://localhost:PORT/mcp"},
		{":0", ":0", "http://[::]:PORT/mcp"},
	} {
		ln, err := net.Listen("tcp", c.listen)
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		want := strings.Replace(c.want, "PORT", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), 1)
		if got := listenURL(c.given, ln.Addr(), "/mcp"); got != want {
			t.Errorf("--addr %s (bound %s): %s, want %s", c.given, ln.Addr(), got, want)
		}
	}
	if got := listenURL("[::1]:9", &net.TCPAddr{IP: net.IPv6loopback, Port: 9}, "/metrics"); got != "http://[::1]:9/metrics" {
		t.Errorf("[::1]:9: %s", got)
	}
}

// The store's name in the logs carries no password, in the user
// information or in the Sentinel form's password parameter.
func TestReplayNameHidesPasswords(t *testing.T) {
	for in, want := range map[string]string{
		"redis://:pw1@h:6379/0": "redis://h:6379/0",
		"redis://u:pw1@s1:26379?master_name=m&password=pw1&addr=s2:26379": "redis://s1:26379?addr=s2%3A26379&master_name=m&password=xxxxx",
		"rediss-cluster://u:pw1@n1:7000?addr=n2:7001":                     "rediss-cluster://n1:7000?addr=n2%3A7001",
		"memory": "memory",
	} {
		c := &CommonConfig{Replay: in}
		if got := c.replayName(); got != want || strings.Contains(got, "pw1") {
			t.Errorf("replayName(%q) = %q, want %q", in, got, want)
		}
	}
}

// serve warns once at startup when the Redis it reaches would forget used
// tokens in a restart (no AOF, no replicas), and not otherwise; a server
// whose INFO is forbidden costs one quiet line, not a warning.
func TestReplayDurabilityWarning(t *testing.T) {
	t.Parallel()
	type want struct {
		warnings int
		msg      string
	}
	plain := testredis.StartServer(t)
	aof := testredis.StartServerArgs(t, "--appendonly", "yes")
	replicated := testredis.StartReplicated(t, 1)
	noInfo := testredis.StartServer(t)
	// INFO and CONFIG forbidden, as a locked-down ACL does.
	rc := redis.NewClient(&redis.Options{Addr: noInfo.Addr()})
	if err := rc.Do(t.Context(), "ACL", "SETUSER", "default", "-info", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	for _, tc := range []struct {
		name     string
		url      string
		replicas int
		want     want
	}{
		{"neither", plain.URL(), 0, want{1, "neither AOF persistence"}},
		{"aof", aof.URL(), 0, want{0, "durability"}},
		{"replica", replicated.Primary.URL(), 0, want{0, "durability"}},
		{"too few replicas", replicated.Primary.URL(), 2, want{1, "fewer replicas than --replay-replicas"}},
		{"info forbidden", noInfo.URL(), 0, want{0, "could not check"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			c := &CommonConfig{Replay: tc.url, ReplayTO: time.Second, Replicas: tc.replicas}
			_, closeStore, err := c.openStore(context.Background(), log)
			if err != nil {
				t.Fatal(err)
			}
			closeStore()
			warnings, found := 0, false
			for line := range strings.Lines(buf.String()) {
				var rec struct{ Level, Msg string }
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatal(err)
				}
				if rec.Level == "WARN" {
					warnings++
				}
				found = found || strings.Contains(rec.Msg, tc.want.msg)
			}
			if warnings != tc.want.warnings || !found {
				t.Errorf("%d warnings, want %d, and a line with %q:\n%s", warnings, tc.want.warnings, tc.want.msg, buf.String())
			}
		})
	}
}

func TestLocalOnly(t *testing.T) {
	h := localOnly([]string{"mcp.internal"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, tc := range []struct {
		host, origin string
		want         int
	}{
		{"127.0.0.1:8080", "", 200},
		{"localhost:8080", "http://localhost:3000", 200},
		{"[::1]:8080", "", 200},
		{"mcp.internal", "", 200},
		{"evil.example.com", "", 403},
		{"127.0.0.1:8080", "http://evil.example.com", 403},
		{"127.0.0.1:8080", "null", 403},
		{"localhost.evil.com", "", 403},
	} {
		r := httptest.NewRequest("POST", "/mcp", nil)
		r.Host = tc.host
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("host %q origin %q: %d, want %d", tc.host, tc.origin, w.Code, tc.want)
		}
	}
}

// TestStoreWatchSentinelName: a Sentinel client dials its primary under
// go-redis's placeholder address "FailoverClient"; the log names it in
// words instead.
func TestStoreWatchSentinelName(t *testing.T) {
	logs := new(testcmd.Buffer)
	w := newStoreWatch(slog.New(slog.NewJSONHandler(logs, nil)))
	addr := testcmd.FreeAddr(t)
	var d net.Dialer
	dial := w.DialHook(func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr) // nothing listens there
	})
	for range 3 {
		if _, err := dial(t.Context(), "tcp", "FailoverClient"); err == nil {
			t.Fatal("a dial to a closed port succeeded")
		}
	}
	recs := testcmd.LogLines(logs, storeDownMsg)
	if len(recs) != 1 || recs[0]["addr"] != "the primary the sentinels name" {
		t.Fatalf("down: %v", recs)
	}
	if o := w.down["the primary the sentinels name"]; o == nil || o.failed != 3 {
		t.Fatalf("outage %+v, want 3 failed dials", o)
	}
}
