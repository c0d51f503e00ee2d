package e2e

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

var (
	gatewayFlows  = flag.Int("gatewaycpu.flows", 30, "2-round flows (and as many tools/list) per gateway per round of TestStdioGatewayCPU")
	gatewayRounds = flag.Int("gatewaycpu.rounds", 1, "rounds of TestStdioGatewayCPU, each measuring every gateway once, in an order swapped every round")
)

// gatewayClients is how many clients run the flows of TestStdioGatewayCPU
// at once.
const gatewayClients = 4

// supergateway runs the pinned supergateway (conformance/package.json)
// with --stdio command --outputTransport streamableHttp on a loopback
// port, in a process group of its own (it starts a child per request),
// and returns its /mcp URL and the pid of its node process. The group is
// killed at cleanup.
func supergateway(t *testing.T, command string) (string, int) {
	t.Helper()
	node, script := pinnedNode(t, filepath.Join("supergateway", "dist", "index.js"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	var logs serverLog
	cmd := exec.Command(node, script, "--stdio", command, "--outputTransport", "streamableHttp", "--port", port, "--logLevel", "none")
	cmd.Env = serverEnv()
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start supergateway: %v", err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("supergateway log tail:\n%s", tail(logs.String(), 40))
		}
	})
	u := "http://127.0.0.1:" + port + "/mcp"
	c := &http.Client{Timeout: 5 * time.Second}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := postMCP(c, u, 0, "tools/list", "", map[string]any{}); err == nil {
			return u, pid
		} else if time.Now().After(deadline) {
			t.Fatalf("supergateway answered no tools/list within 30 s: %v\n%s", err, tail(logs.String(), 40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// elicitationFlow runs one 2-round flow of the everything-server's
// test_input_required_result_elicitation through url and checks its
// result.
func elicitationFlow(c *http.Client, url string, id int) error {
	const tool = "test_input_required_result_elicitation"
	res, err := postTool(c, url, id*2, tool, "", nil)
	if err != nil {
		return fmt.Errorf("round 1: %w", err)
	}
	state, _ := res["requestState"].(string)
	if res["resultType"] != "input_required" || state == "" {
		return fmt.Errorf("round 1: want input_required with a requestState, got %v", res)
	}
	res, err = postTool(c, url, id*2+1, tool, state, map[string]any{
		"user_name": map[string]any{"action": "accept", "content": map[string]any{"name": "Alice"}},
	})
	if err != nil {
		return fmt.Errorf("round 2: %w", err)
	}
	if res["resultType"] != "complete" || !strings.Contains(fmt.Sprint(res["content"]), "Hello, Alice!") {
		return fmt.Errorf("round 2: wrong result %v", res)
	}
	return nil
}

// toolsList lists the tools through url and checks that the 2-round tool
// is among them.
func toolsList(c *http.Client, url string, id int) error {
	res, err := postMCP(c, url, id, "tools/list", "", map[string]any{})
	if err != nil {
		return err
	}
	if !strings.Contains(fmt.Sprint(res["tools"]), "test_input_required_result_elicitation") {
		return fmt.Errorf("tools/list without test_input_required_result_elicitation: %.200v", res)
	}
	return nil
}

// runAll runs n calls of one against url from gatewayClients clients at
// once and returns the first error.
func runAll(c *http.Client, url string, n int, one func(c *http.Client, url string, id int) error) error {
	var (
		next  atomic.Int64
		once  sync.Once
		first error
		wg    sync.WaitGroup
	)
	for range gatewayClients {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > n {
					return
				}
				if err := one(c, url, i); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	wg.Wait()
	return first
}

// peakRSS is the peak resident set size of pid (VmHWM), in MiB.
func peakRSS(t *testing.T, pid int) float64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for s := bufio.NewScanner(f); s.Scan(); {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatalf("VmHWM of pid %d: %q", pid, v)
			}
			return float64(kb) / 1024
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// TestStdioGatewayCPU puts `mrtr proxy -- everything-server` (go-sdk's
// 2026-07-28 conformance server over stdio) beside supergateway
// (--stdio everything-server --outputTransport streamableHttp), the stdio
// gateway people run today, and measures in one run, with the same
// client and flows, each gateway process's own CPU (user + system, from
// /proc) per 2-round MRTR flow of test_input_required_result_elicitation
// and per tools/list, and its peak RSS. The upstream's CPU is not
// counted: supergateway starts a child per request, mrtr keeps one. Each
// round measures both, in an order swapped every round; the ratios are
// paired per round, then their median taken. Every flow through either
// must complete with the right result. The numbers of docs/BENCHMARKS.md
// come from
//
//	go test ./e2e -run TestStdioGatewayCPU -count=1 -v -gatewaycpu.flows 200 -gatewaycpu.rounds 5
func TestStdioGatewayCPU(t *testing.T) {
	if *gatewayFlows <= 0 || *gatewayRounds <= 0 {
		t.Fatalf("-gatewaycpu.flows and -gatewaycpu.rounds must be positive")
	}
	bin := needEverything(t)
	sgURL, sgPID := supergateway(t, bin)
	mrtrURL, mrtrPID := startProxyPID(t, "--keys", mnKeyRing(t, "k1"), "--", bin)
	type gateway struct {
		name string
		url  string
		pid  int
	}
	gateways := []gateway{{"mrtr proxy", mrtrURL, mrtrPID}, {"supergateway 4.0.0", sgURL, sgPID}}
	tr := &http.Transport{MaxIdleConnsPerHost: gatewayClients}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: time.Minute}
	for _, g := range gateways { // warm up: the first child, the JIT, the connections
		if err := runAll(c, g.url, 2*gatewayClients, elicitationFlow); err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
	}
	race := ""
	if raceEnabled() {
		race = ", -race (numbers not comparable: mrtr is built with the race detector)"
	}
	t.Logf("%d flows and %d tools/list per gateway per round, %d clients, GOMAXPROCS %d%s", *gatewayFlows, *gatewayFlows, gatewayClients, runtime.GOMAXPROCS(0), race)
	t.Logf("| round | gateway | CPU per 2-round flow | wall per flow | CPU per tools/list |")
	t.Logf("| ---: | --- | ---: | ---: | ---: |")
	type sample struct{ flow, wall, list time.Duration }
	per := make([][]sample, len(gateways))
	var flowRatio, listRatio []float64
	for r := range *gatewayRounds {
		got := make([]sample, len(gateways))
		for k := range gateways {
			i := (k + r) % len(gateways)
			g := gateways[i]
			n := time.Duration(*gatewayFlows)
			c0, w0 := cpuOf(t, g.pid), time.Now()
			if err := runAll(c, g.url, *gatewayFlows, elicitationFlow); err != nil {
				t.Fatalf("%s: a flow failed: %v", g.name, err)
			}
			c1, w1 := cpuOf(t, g.pid), time.Now()
			if err := runAll(c, g.url, *gatewayFlows, toolsList); err != nil {
				t.Fatalf("%s: a tools/list failed: %v", g.name, err)
			}
			c2 := cpuOf(t, g.pid)
			got[i] = sample{(c1 - c0) / n, w1.Sub(w0) / n, (c2 - c1) / n}
			per[i] = append(per[i], got[i])
			t.Logf("| %d | %s | %v | %v | %v |", r+1, g.name, got[i].flow.Round(time.Microsecond), got[i].wall.Round(time.Microsecond), got[i].list.Round(time.Microsecond))
		}
		if got[1].flow > 0 && got[1].list > 0 {
			flowRatio = append(flowRatio, float64(got[0].flow)/float64(got[1].flow))
			listRatio = append(listRatio, float64(got[0].list)/float64(got[1].list))
		}
	}
	t.Logf("medians over %d rounds:", *gatewayRounds)
	t.Logf("| gateway | CPU per flow | wall per flow | CPU per tools/list | peak RSS |")
	t.Logf("| --- | ---: | ---: | ---: | ---: |")
	for i, g := range gateways {
		t.Logf("| %s | %v | %v | %v | %.0f MiB |", g.name,
			median(per[i], func(x sample) time.Duration { return x.flow }).Round(time.Microsecond),
			median(per[i], func(x sample) time.Duration { return x.wall }).Round(time.Microsecond),
			median(per[i], func(x sample) time.Duration { return x.list }).Round(time.Microsecond),
			peakRSS(t, g.pid))
	}
	if len(flowRatio) > 0 {
		t.Logf("paired ratios mrtr / supergateway, per round: per flow %.3f (median %.3f), per tools/list %.3f (median %.3f)",
			flowRatio, medianF(flowRatio), listRatio, medianF(listRatio))
	}
}
