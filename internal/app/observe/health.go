package observe

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// DefaultCheckTimeout bounds each readiness check when Health.Timeout is
// zero.
const DefaultCheckTimeout = 2 * time.Second

// Check is one readiness condition: Fn returns nil when it holds.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
	// Quiet leaves the check out of /readyz's body while it passes, and
	// its failures out of the log: a state that matters only when it
	// fails, and that its owner logs (like a drain).
	Quiet bool
}

// Health answers an orchestrator's probes: Healthz says the process
// serves HTTP, Readyz runs every check, each bounded by Timeout, at once.
// Both answer GET and HEAD with JSON: {"status":"ok"} with 200, or
// {"status":"unready","checks":{NAME:"..."}} with 503. A failed check is
// reported as "unreachable" or "timeout", never with its error's text
// (an unauthenticated caller reads it); the error goes to Logger at warn.
// A Health is safe for concurrent use once built.
type Health struct {
	Checks  []Check
	Timeout time.Duration // per check; zero means DefaultCheckTimeout
	Logger  *slog.Logger  // nil: no logging
}

// CheckError is a check's failure that /readyz reports by Status (like
// "refused") instead of "unreachable" or "timeout".
type CheckError struct {
	Status string
	Err    error
}

func (e *CheckError) Error() string { return e.Err.Error() }
func (e *CheckError) Unwrap() error { return e.Err }

type healthBody struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks,omitempty"`
}

// Healthz answers 200 {"status":"ok"} while the process serves HTTP.
func (h *Health) Healthz(w http.ResponseWriter, r *http.Request) {
	if !probeMethod(w, r) {
		return
	}
	writeHealth(w, http.StatusOK, healthBody{Status: "ok"})
}

// Readyz answers 200 when every check passes, 503 otherwise.
func (h *Health) Readyz(w http.ResponseWriter, r *http.Request) {
	if !probeMethod(w, r) {
		return
	}
	results := h.Run(r.Context())
	body := healthBody{Status: "ok", Checks: results}
	code := http.StatusOK
	for _, v := range results {
		if v != "ok" {
			body.Status, code = "unready", http.StatusServiceUnavailable
		}
	}
	writeHealth(w, code, body)
}

// Run runs every check at once and returns each one's result: "ok",
// the Status of a [CheckError], "timeout" or "unreachable" (a Quiet
// check only when it fails).
func (h *Health) Run(ctx context.Context) map[string]string {
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultCheckTimeout
	}
	results := make(map[string]string, len(h.Checks))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range h.Checks {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			res := "ok"
			if err := c.Fn(cctx); err != nil {
				var ce *CheckError
				switch {
				case errors.As(err, &ce):
					res = ce.Status
				case errors.Is(err, context.DeadlineExceeded):
					res = "timeout"
				default:
					res = "unreachable"
				}
				if h.Logger != nil && !c.Quiet {
					h.Logger.WarnContext(ctx, "readiness check failed", "check", c.Name, "error", err)
				}
			}
			if res == "ok" && c.Quiet {
				return
			}
			mu.Lock()
			results[c.Name] = res
			mu.Unlock()
		})
	}
	wg.Wait()
	return results
}

func probeMethod(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return false
	}
	return true
}

func writeHealth(w http.ResponseWriter, code int, body healthBody) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(body)
}
