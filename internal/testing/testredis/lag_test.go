package testredis

import (
	"io"
	"net"
	"testing"
	"time"
)

// A LagLink delivers what the target sends, and drops what the target sent
// but the link had not yet delivered when the target goes away.
func TestLagLink(t *testing.T) {
	for _, tc := range []struct {
		name string
		lag  time.Duration
		want string // what the client reads before EOF
	}{
		{"Delivers", 0, "hello"},
		{"DropsInFlight", time.Hour, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer target.Close()
			link := StartLagLink(t, target.Addr().String(), tc.lag)
			client, err := net.Dial("tcp", link.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			server, err := target.Accept()
			if err != nil {
				t.Fatal(err)
			}
			// The client's direction has no lag.
			if _, err := client.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 4)
			if _, err := io.ReadFull(server, buf); err != nil || string(buf) != "ping" {
				t.Fatalf("target read %q, %v", buf, err)
			}
			if _, err := server.Write([]byte("hello")); err != nil {
				t.Fatal(err)
			}
			if tc.lag == 0 {
				got := make([]byte, 5)
				if _, err := io.ReadFull(client, got); err != nil || string(got) != tc.want {
					t.Fatalf("client read %q, %v; want %q", got, err, tc.want)
				}
			}
			server.Close() // the target dies
			got, err := io.ReadAll(client)
			if tc.lag == 0 {
				got = append([]byte("hello"), got...)
			}
			if string(got) != tc.want {
				t.Fatalf("client read %q (%v) in all, want %q", got, err, tc.want)
			}
		})
	}
}

// A CutLink passes replies through until Cut; then it drops the reply to
// the next request with the marker, closes that connection (the client
// reads EOF, nothing else), and passes replies through again.
func TestCutLink(t *testing.T) {
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	go func() {
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }() // an echo server
		}
	}()
	link := StartCutLink(t, target.Addr().String())
	echo := func(msg string) (string, error) {
		c, err := net.Dial("tcp", link.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(msg))
		n, err := io.ReadFull(c, buf)
		return string(buf[:n]), err
	}
	if got, err := echo("ping"); got != "ping" || err != nil {
		t.Fatalf("before Cut: %q, %v", got, err)
	}
	lost := link.Cut("marked")
	if got, err := echo("ping"); got != "ping" || err != nil {
		t.Fatalf("after Cut, unmarked: %q, %v", got, err)
	}
	if got, err := echo("a marked ping"); got != "" || err != io.EOF {
		t.Fatalf("after Cut, marked: %q, %v; want nothing, EOF", got, err)
	}
	<-lost
	if got, err := echo("a marked ping"); got != "a marked ping" || err != nil {
		t.Fatalf("after the lost reply: %q, %v", got, err)
	}
}
