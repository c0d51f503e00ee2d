package e2e

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/testing/testredis"
)

var proxyCPURounds = flag.Int("proxycpu.rounds", 1, "rounds of TestProxyCPU, each running every setup once, in an order rotated every round")

// reverseProxyEnv names the upstream URL when this test binary runs as the
// bare reverse proxy of TestProxyCPU.
const reverseProxyEnv = "MRTR_E2E_REVERSEPROXY"

// serveReverseProxy runs a bare net/http/httputil.ReverseProxy to
// upstream on a loopback port, as `mrtr proxy` forwards everything it
// does not rewrite (streamed, FlushInterval -1; the same transport
// settings), prints its URL and serves until killed.
func serveReverseProxy(upstream string) int {
	u, err := url.Parse(upstream)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reverseproxy:", err)
		return 1
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.Out.URL.Path = u.Path; pr.SetXForwarded() },
		Transport:     tr,
		FlushInterval: -1,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "reverseproxy:", err)
		return 1
	}
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	_ = http.Serve(ln, rp)
	return 1
}

// startReverseProxy runs serveReverseProxy in a child process and returns
// its URL and pid.
func startReverseProxy(t *testing.T, upstream string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), reverseProxyEnv+"="+upstream)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reverse proxy: %v", err)
	}
	return line[:len(line)-1], cmd.Process.Pid
}

// TestProxyCPU measures, in one run, the CPU time per 3-round flow of the
// everything-server that each way of forwarding costs under
// -load.clients concurrent clients, each a separate process read through
// /proc (user + system): a bare httputil.ReverseProxy, `mrtr proxy` with
// the memory store and `mrtr proxy` on Redis, with the upstream's own CPU
// beside each (and straight to the upstream, for the upstream alone).
// Each round runs every setup once, in an order rotated every round, and
// the ratios are paired per round (mrtr memory / reverseproxy, Redis /
// memory), then their median taken. Every flow through mrtr must
// complete with the right result: none lost (pinned here); the bare
// reverse proxy's losses (golang/go#40747) are reported. The numbers of
// docs/BENCHMARKS.md come from
//
//	go test ./e2e -run TestProxyCPU -count=1 -v -load.duration 5s -proxycpu.rounds 5
func TestProxyCPU(t *testing.T) {
	if *loadDuration <= 0 || *loadClients <= 0 || *proxyCPURounds <= 0 {
		t.Fatalf("-load.duration, -load.clients and -proxycpu.rounds must be positive")
	}
	redisURL := testredis.Start(t)
	up, upPID := startEverythingPID(t, true)
	keys := mnKeyRing(t, "k1")
	type setup struct {
		name string
		url  string
		pid  int // 0: straight to the upstream
		mrtr bool
	}
	rpURL, rpPID := startReverseProxy(t, up)
	memURL, memPID := startProxiedPID(t, up, "--keys", keys, "--replay", "memory")
	redURL, redPID := startProxiedPID(t, up, "--keys", keys, "--replay", redisURL)
	setups := []setup{
		{"straight to the upstream", up, 0, false},
		{"httputil.ReverseProxy", rpURL, rpPID, false},
		{"mrtr proxy, memory store", memURL, memPID, true},
		{"mrtr proxy, Redis store", redURL, redPID, true},
	}
	upPort := portOf(t, up)
	type sample struct {
		proxyPerFlow, upPerFlow time.Duration
		connsPerFlow            float64 // TCP connections opened to the upstream
	}
	per := make([][]sample, len(setups))
	var rpMem, redMem []float64
	race := ""
	if raceEnabled() {
		race = ", -race (numbers not comparable; the test checks that no flow is lost)"
	}
	t.Logf("%d clients, %v per setup, 3-round flows of the everything-server, GOMAXPROCS %d%s", *loadClients, *loadDuration, runtime.GOMAXPROCS(0), race)
	t.Logf("| round | setup | flows | failed | proxy CPU per flow | upstream CPU per flow | connections to the upstream per flow |")
	t.Logf("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
	for r := range *proxyCPURounds {
		order := make([]int, len(setups))
		for i := range order {
			order[i] = (i + r) % len(setups)
		}
		got := make([]sample, len(setups))
		for _, i := range order {
			s := setups[i]
			c0 := connsTo(upPort)
			p0, u0 := cpuOf(t, s.pid), cpuOf(t, upPID)
			res := proxyLoad(s.name, []string{s.url})
			p1, u1 := cpuOf(t, s.pid), cpuOf(t, upPID)
			opened := 0
			for c := range connsTo(upPort) {
				if !c0[c] {
					opened++
				}
			}
			if res.flows == 0 {
				t.Fatalf("%s: no flow completed (first error: %v)", s.name, res.firstErr)
			}
			if s.mrtr && res.failed > 0 {
				t.Errorf("%s: %d of %d flows lost (first: %v)", s.name, res.failed, res.flows+res.failed, res.firstErr)
			}
			got[i] = sample{(p1 - p0) / time.Duration(res.flows), (u1 - u0) / time.Duration(res.flows), float64(opened) / float64(res.flows)}
			per[i] = append(per[i], got[i])
			t.Logf("| %d | %s | %d | %d | %v | %v | %.4f |", r+1, s.name, res.flows, res.failed, got[i].proxyPerFlow.Round(time.Microsecond), got[i].upPerFlow.Round(time.Microsecond), got[i].connsPerFlow)
		}
		rpMem = append(rpMem, float64(got[2].proxyPerFlow)/float64(got[1].proxyPerFlow))
		redMem = append(redMem, float64(got[3].proxyPerFlow)/float64(got[2].proxyPerFlow))
	}
	t.Logf("medians over %d rounds:", *proxyCPURounds)
	t.Logf("| setup | proxy CPU per flow | upstream CPU per flow |")
	t.Logf("| --- | ---: | ---: |")
	for i, s := range setups {
		t.Logf("| %s | %v | %v |", s.name, median(per[i], func(x sample) time.Duration { return x.proxyPerFlow }).Round(time.Microsecond),
			median(per[i], func(x sample) time.Duration { return x.upPerFlow }).Round(time.Microsecond))
	}
	t.Logf("paired ratios, per round: mrtr memory / reverseproxy %.3f (median %.3f); Redis / memory %.3f (median %.3f)",
		rpMem, medianF(rpMem), redMem, medianF(redMem))
}

// portOf returns the port of rawURL, in the hexadecimal /proc/net/tcp
// spells it with.
func portOf(t *testing.T, rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatalf("port of %s: %v", rawURL, err)
	}
	return fmt.Sprintf("%04X", n)
}

// connsTo returns the TCP connections of this machine whose remote port is
// port (hexadecimal), by local address, from /proc/net/tcp and tcp6: the
// live ones and, for 60 s after they close, the ones in TIME_WAIT, so a
// connection opened during a 5 s run is new in the set after it, however
// short it lived.
func connsTo(port string) map[string]bool {
	out := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 3 || fs[3] == "0A" { // 0A: LISTEN
				continue
			}
			if _, rport, ok := strings.Cut(fs[2], ":"); ok && rport == port {
				out[fs[1]] = true
			}
		}
	}
	return out
}

func cpuOf(t *testing.T, pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	d, err := loadCPU(pid)
	if err != nil {
		t.Fatalf("CPU of pid %d: %v", pid, err)
	}
	return d
}

func median[T any](xs []T, f func(T) time.Duration) time.Duration {
	ds := make([]time.Duration, len(xs))
	for i, x := range xs {
		ds[i] = f(x)
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func medianF(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
