package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mrtr-go/mrtr/internal/app/observe"
)

// TestLateEraBackoffCapped (issue 35): while the upstream does not answer,
// the probes back off, doubling, but never wait longer than
// lateEraMaxBackoff between two of them.
func TestLateEraBackoffCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var at []time.Time
		l := newLateEra(slog.New(slog.DiscardHandler), "http://127.0.0.1:1/mcp", func(context.Context) (string, error) {
			at = append(at, time.Now())
			if len(at) == 20 {
				cancel()
			}
			return "", errors.New("connection refused")
		})
		l.bind = func(string) (http.Handler, error) { t.Error("bound without an answer"); return nil, nil }
		l.start(ctx)
		<-l.done
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); gap > lateEraMaxBackoff {
				t.Fatalf("probe %d came %v after the one before, want at most %v (the backoff's cap)", i+1, gap, lateEraMaxBackoff)
			}
		}
		if gap := at[len(at)-1].Sub(at[len(at)-2]); gap != lateEraMaxBackoff {
			t.Fatalf("the last probes came %v apart, want the cap %v", gap, lateEraMaxBackoff)
		}
	})
}

// TestLateEraHalt (issue 35): halt cancels the probe in progress and waits
// for run to return, so that nothing is bound (nor a replica advertised)
// after it.
func TestLateEraHalt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel() // frees the probe if halt did not
		probing := make(chan struct{})
		var probeErr error
		l := newLateEra(slog.New(slog.DiscardHandler), "http://127.0.0.1:1/mcp", func(ctx context.Context) (string, error) {
			close(probing)
			<-ctx.Done()
			probeErr = ctx.Err()
			return eraLegacy, nil // an answer that arrives as it is cancelled
		})
		bound := false
		l.bind = func(string) (http.Handler, error) { bound = true; return http.NotFoundHandler(), nil }
		l.start(ctx)
		<-probing
		l.halt()
		select {
		case <-l.done:
		default:
			t.Fatal("halt returned while the probes still run")
		}
		if probeErr == nil {
			t.Fatal("halt did not cancel the probe in progress")
		}
		was := bound
		synctest.Wait()
		if bound != was {
			t.Fatal("the upstream was bound after halt returned")
		}
	})
}

// TestLateEraReady (issue 35): /readyz fails with era_unknown until the
// upstream answered a probe, then says what the bound path says.
func TestLateEraReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		answer := make(chan struct{})
		l := newLateEra(slog.New(slog.DiscardHandler), "http://127.0.0.1:1/mcp", func(ctx context.Context) (string, error) {
			select {
			case <-answer:
				return eraLegacy, nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})
		l.bind = func(string) (http.Handler, error) { return http.NotFoundHandler(), nil }
		boundErr := errors.New("the bridge's last start failed")
		bound := func(context.Context) error { return boundErr }
		var ce *observe.CheckError
		if err := l.ready(t.Context(), bound); !errors.As(err, &ce) || ce.Status != "era_unknown" {
			t.Fatalf("ready before the upstream answered: %v, want era_unknown", err)
		}
		l.start(t.Context())
		synctest.Wait()
		if err := l.ready(t.Context(), nil); !errors.As(err, &ce) || ce.Status != "era_unknown" {
			t.Fatalf("ready while the probe waits: %v, want era_unknown", err)
		}
		close(answer)
		<-l.known
		if err := l.ready(t.Context(), bound); err != boundErr {
			t.Fatalf("ready once bound: %v, want the bound path's own %v", err, boundErr)
		}
		if err := l.ready(t.Context(), nil); err != nil {
			t.Fatalf("ready once bound, without a check of its own: %v", err)
		}
		l.halt()
	})
}

// TestLateEraCloseStops (issue 35): close ends what the bind started (the
// bridge's sessions, whose GET streams keep the upstream's connections
// open), once, after halting the probes.
func TestLateEraCloseStops(t *testing.T) {
	l := newLateEra(slog.New(slog.DiscardHandler), "http://127.0.0.1:1/mcp", func(ctx context.Context) (string, error) { return eraLegacy, nil })
	l.bind = func(string) (http.Handler, error) { return http.NotFoundHandler(), nil }
	stopped := 0
	l.setStop(func(context.Context) error { stopped++; return nil })
	l.start(t.Context())
	<-l.known
	if err := l.close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if stopped != 1 {
		t.Fatalf("close called the bound path's stop %d times, want 1: the bridge's sessions live on", stopped)
	}
}
