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
