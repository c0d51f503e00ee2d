//go:build unix

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkBridgeFirstPause (issue 28, item 6): the first response of a
// bridged call that pauses, on a proxy just started in front of
// server-everything over stdio: the time from the tools/call of
// trigger-elicitation-request to its input_required result. cold
// (--warm 0) starts the child for the call; warm (--warm 1) finds one
// initialized before the call. Both take the era as given (no probe,
// whose child would otherwise serve the first call warm), and each
// iteration runs a proxy of its own, started and stopped outside the
// timer (the warm one timed once its child is ready). p50-ms and p90-ms
// are over the iterations of a run.
func BenchmarkBridgeFirstPause(b *testing.B) {
	node, script := serverEverything(b)
	for _, c := range []struct {
		name string
		warm string
	}{{"cold", "0"}, {"warm", "1"}} {
		b.Run(c.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for range b.N {
				b.StopTimer()
				url, pid, logs := startProxyLog(b, "--upstream-era", "legacy", "--warm", c.warm, "--", node, script, "stdio")
				if c.warm != "0" {
					waitLog(b, logs, "bridge: upstream session started")
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				b.StartTimer()
				start := time.Now()
				res, e := bridgeRPC(b, ctx, url, "", "trigger-elicitation-request", map[string]any{}, "", nil)
				lat = append(lat, time.Since(start))
				b.StopTimer()
				if e != nil || string(res["resultType"]) != `"input_required"` {
					b.Fatalf("the first call: %v %v", res, e)
				}
				// End the flow (a decline), so the proxy stops at once.
				var st string
				var irs map[string]json.RawMessage
				json.Unmarshal(res["requestState"], &st)
				json.Unmarshal(res["inputRequests"], &irs)
				answers := map[string]any{}
				for k := range irs {
					answers[k] = map[string]any{"action": "decline"}
				}
				if _, e := bridgeRPC(b, ctx, url, "", "trigger-elicitation-request", map[string]any{}, st, answers); e != nil {
					b.Fatalf("the decline: %v", e)
				}
				cancel()
				stopPID(b, pid)
				b.StartTimer()
			}
			b.StopTimer()
			b.ReportMetric(percentile(lat, 0.5), "p50-ms")
			b.ReportMetric(percentile(lat, 0.9), "p90-ms")
		})
	}
}

// percentile is the nearest-rank p-th percentile of d, in milliseconds.
func percentile(d []time.Duration, p float64) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	i := max(int(math.Ceil(p*float64(len(s))))-1, 0)
	return float64(s[i]) / float64(time.Millisecond)
}

// waitLog waits, within a minute, for a record of logs with message msg.
func waitLog(t testing.TB, logs *serverLog, msg string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !strings.Contains(logs.String(), `"msg":"`+msg+`"`); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log within a minute:\n%s", msg, logs.String())
		}
	}
}

// stopPID sends SIGTERM to the process pid (one startProxyLog started,
// which reaps it) and waits, within 10 s, until it is gone.
func stopPID(t testing.TB, pid int) {
	t.Helper()
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for deadline := time.Now().Add(10 * time.Second); !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs 10 s after SIGTERM", pid)
		}
	}
}
