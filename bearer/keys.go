package bearer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// The key set policy is ours rather than a JWKS library's, because none
// gives exactly this together with an injectable clock:
//
//   - the last good set stays in force when a fetch fails (endpoint down,
//     garbage, a half-written file), so an issuer outage never locks
//     everyone out of a running server;
//   - a background refresh every RefreshInterval picks up rotations and
//     revocations on an idle server;
//   - an unknown kid triggers a fetch, but at most one fetch starts per
//     RefetchInterval whatever the traffic: a flood of tokens with random
//     kids costs one request to the issuer per interval, and concurrent
//     callers share the fetch in flight.

// source yields key sets: a JWKS URL or a file.
type source interface {
	// load returns the current set, or nil and no error when a file has
	// not changed since the last successful load.
	load(ctx context.Context) (*keySet, error)
	String() string
}

// keyLoader holds the current key set and refreshes it.
type keyLoader struct {
	src          source
	now          func() time.Time
	refetchEvery time.Duration
	fetchTimeout time.Duration
	log          *slog.Logger

	set atomic.Pointer[keySet]

	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	lastFetch time.Time     // start of the last fetch, by now()
	inflight  chan struct{} // closed when the fetch in flight ends
	lastErr   error         // result of the last fetch
	fetches   int64         // fetches started (tests and logs)
}

func newKeyLoader(src source, now func() time.Time, refetchEvery, fetchTimeout time.Duration, log *slog.Logger) *keyLoader {
	ctx, cancel := context.WithCancel(context.Background())
	return &keyLoader{src: src, now: now, refetchEvery: refetchEvery, fetchTimeout: fetchTimeout, log: log, ctx: ctx, cancel: cancel}
}

// lookup returns the key for kid, fetching the set once more when the kid
// is unknown and the last fetch started at least refetchEvery ago (or
// waiting for the fetch already in flight).
func (l *keyLoader) lookup(ctx context.Context, kid string) (verifyKey, bool) {
	if k, ok := l.set.Load().lookup(kid); ok {
		return k, true
	}
	l.mu.Lock()
	done := l.inflight
	if done == nil {
		if l.now().Sub(l.lastFetch) < l.refetchEvery {
			l.mu.Unlock()
			return verifyKey{}, false
		}
		done = l.startLocked()
	}
	l.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return verifyKey{}, false
	}
	return l.set.Load().lookup(kid)
}

// refresh fetches the set now, after any fetch already in flight, and
// returns that fetch's error.
func (l *keyLoader) refresh(ctx context.Context) error {
	for {
		l.mu.Lock()
		if l.inflight != nil {
			done := l.inflight
			l.mu.Unlock()
			select {
			case <-done:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		done := l.startLocked()
		l.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
		l.mu.Lock()
		err := l.lastErr
		l.mu.Unlock()
		return err
	}
}

// startLocked starts a fetch in its own goroutine, so that a caller that
// gives up does not cancel it for the others. l.mu must be held.
func (l *keyLoader) startLocked() chan struct{} {
	done := make(chan struct{})
	l.inflight = done
	l.lastFetch = l.now()
	l.fetches++
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		ctx, cancel := context.WithTimeout(l.ctx, l.fetchTimeout)
		set, err := l.src.load(ctx)
		cancel()
		switch {
		case err != nil:
			if l.set.Load() != nil {
				l.log.Warn("JWKS refresh failed; keeping the last good key set", "jwks", l.src.String(), "error", err)
			}
		case set != nil:
			old := l.set.Swap(set)
			if old == nil || !slicesEqual(old.kids(), set.kids()) {
				l.log.Info("JWKS loaded", "jwks", l.src.String(), "kids", set.kids(), "skipped", set.skipped)
			}
		}
		l.mu.Lock()
		l.lastErr = err
		l.inflight = nil
		l.mu.Unlock()
		close(done)
	}()
	return done
}

// run refreshes every interval until close; after a failure it retries
// after retry (shorter) instead.
func (l *keyLoader) run(interval, retry time.Duration) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTimer(interval)
		defer t.Stop()
		for {
			select {
			case <-l.ctx.Done():
				return
			case <-t.C:
			}
			next := interval
			if err := l.refresh(l.ctx); err != nil {
				next = min(interval, retry)
			}
			t.Reset(next)
		}
	}()
}

func (l *keyLoader) close() {
	l.cancel()
	l.wg.Wait()
}

func (l *keyLoader) fetchCount() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fetches
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// urlSource fetches a JWKS over HTTP(S).
type urlSource struct {
	url    string
	client *http.Client
}

func (s *urlSource) String() string { return s.url }

func (s *urlSource) load(ctx context.Context) (*keySet, error) {
	body, err := getDocument(ctx, s.client, s.url)
	if err != nil {
		return nil, err
	}
	return parseJWKS(body)
}

// getDocument GETs a small JSON document: 200 only, bounded size.
func getDocument(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, &statusError{url: url, code: resp.StatusCode}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentLen+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", url, err)
	}
	if len(body) > maxDocumentLen {
		return nil, fmt.Errorf("read %s: larger than %d bytes", url, maxDocumentLen)
	}
	return body, nil
}

type statusError struct {
	url  string
	code int
}

func (e *statusError) Error() string { return fmt.Sprintf("GET %s: HTTP status %d", e.url, e.code) }

// fileSource reads a JWKS file, again only when its modification time or
// size changed since the last successful read.
type fileSource struct {
	path string

	mu   sync.Mutex
	seen os.FileInfo
}

func (s *fileSource) String() string { return s.path }

func (s *fileSource) load(context.Context) (*keySet, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, err := os.Stat(s.path)
	if err != nil {
		return nil, err
	}
	if s.seen != nil && fi.ModTime().Equal(s.seen.ModTime()) && fi.Size() == s.seen.Size() && os.SameFile(fi, s.seen) {
		return nil, nil
	}
	if fi.Size() > maxDocumentLen {
		return nil, fmt.Errorf("read %s: larger than %d bytes", s.path, maxDocumentLen)
	}
	data, err := os.ReadFile(s.path)
	if err != nil {
		return nil, err
	}
	set, err := parseJWKS(data)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.path, err)
	}
	s.seen = fi
	return set, nil
}
