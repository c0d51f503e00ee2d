package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
)

// TestFlowMCPGo proves every endpoint of BenchmarkFlowMCPGo measures a
// working 2-round flow: the text is right and the handler ran twice per
// flow, so the client really resumed, with a state of the length the
// endpoint stands for.
func TestFlowMCPGo(t *testing.T) {
	for _, ep := range MCPGoFlowEndpoints {
		t.Run(ep.Name, func(t *testing.T) {
			fs := NewMCPGoFlowServer()
			defer fs.Close()
			var lens stateLens
			c, err := fs.connect(context.Background(), ep.Path, lens.wrap)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for range 3 {
				if got, err := MCPGoFlowCall(context.Background(), c); err != nil || got != FlowWant {
					t.Fatalf("%q, %v", got, err)
				}
			}
			if n := fs.Runs(); n != 6 {
				t.Fatalf("handler ran %d times for 3 flows, want 6", n)
			}
			// The resumed calls carried a state of the length the
			// endpoint stands for: the sealed token's for the sealed
			// endpoints and plain-sized, the bare 26 characters for plain.
			want := SealedStateLen()
			if ep.Name == "plain" {
				want = len("service=api;env=production")
			}
			if got := lens.all(); len(got) != 3 || got[0] != want || got[1] != want || got[2] != want {
				t.Fatalf("resumed with states of %v characters, want 3 of %d", got, want)
			}
		})
	}
}

// stateLens records the length of the requestState of every request a
// client sends that carries one.
type stateLens struct {
	mu   sync.Mutex
	lens []int
}

func (s *stateLens) all() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.lens...)
}

func (s *stateLens) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Body != nil {
			body, err := io.ReadAll(r.Body)
			r.Body.Close()
			if err != nil {
				return nil, err
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				Params struct {
					RequestState *string `json:"requestState"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &m) == nil && m.Params.RequestState != nil {
				s.mu.Lock()
				s.lens = append(s.lens, len(*m.Params.RequestState))
				s.mu.Unlock()
			}
		}
		return next.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
