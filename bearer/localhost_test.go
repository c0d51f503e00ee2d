package bearer_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/mrtr-go/mrtr/bearer"
)

// TestClearTextOnlyToLoopbackAddresses: http is allowed only to a loopback
// host, but Go's resolver sends a name under .localhost to the network's
// DNS like any other (it is not in /etc/hosts), which may answer with any
// address: keys fetched in clear text from there could be anyone's. So a
// .localhost name is not a loopback host for a fetch: refused before
// anything is resolved or dialled, as a JWKS URL and as a redirect target.
func TestClearTextOnlyToLoopbackAddresses(t *testing.T) {
	var mu sync.Mutex
	var dialled []string
	client := &http.Client{Transport: &http.Transport{DialContext: func(_ context.Context, _, addr string) (net.Conn, error) {
		mu.Lock()
		dialled = append(dialled, addr)
		mu.Unlock()
		return nil, errors.New("test: no dialling")
	}}}
	for _, jwks := range []string{"http://idp.localhost:8080/jwks", "http://a.b.localhost/jwks"} {
		_, err := bearer.New(t.Context(), &bearer.Options{Issuer: "https://id.example", Audience: audience, JWKS: jwks, HTTPClient: client})
		if err == nil || !strings.Contains(err.Error(), "http is allowed only to a loopback host") {
			t.Errorf("JWKS %s: %v, want it refused as clear text to a network host", jwks, err)
		}
	}
	_, err := bearer.New(t.Context(), &bearer.Options{Issuer: "http://idp.localhost:8080", Audience: audience, HTTPClient: client})
	if err == nil || !strings.Contains(err.Error(), "http is allowed only to a loopback host") {
		t.Errorf("discovery of http://idp.localhost:8080: %v, want it refused as clear text to a network host", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialled) != 0 {
		t.Fatalf("dialled %v", dialled)
	}
}
