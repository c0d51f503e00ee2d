package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Helpers of the multi-node and load tests: `mrtr serve` processes that a
// test stops and starts again on the same port, go-sdk clients that run the
// Multi Round-Trip loop by hand so that each round can go to another node,
// and a router that drains a node before it restarts, the way a load
// balancer would.

// mnServerID is the --server-id every node of a test cluster shares: it is
// bound into each requestState, so nodes that disagree on it cannot resume
// each other's flows.
const mnServerID = "mrtr-e2e-cluster"

// mnProc is one running `mrtr serve` process.
type mnProc struct {
	t       testing.TB
	cmd     *exec.Cmd
	logs    *serverLog
	url     string // http://127.0.0.1:PORT/mcp
	exited  chan struct{}
	waitErr error // set before exited is closed

	stopOnce sync.Once
}

// mnStart runs `mrtr serve --addr addr --log-format json` plus args, with
// this process's environment minus MRTR_* plus env, and waits for its
// "mrtr serving" line. The process is stopped by its id at cleanup unless
// the test stopped it already.
func mnStart(t testing.TB, addr string, env []string, args ...string) *mnProc {
	t.Helper()
	full := append([]string{"serve", "--addr", addr, "--log-format", "json"}, args...)
	p := &mnProc{t: t, logs: &serverLog{url: make(chan string, 1)}, exited: make(chan struct{})}
	p.cmd = exec.Command(mrtrBin, full...)
	p.cmd.Env = append(serverEnv(), env...)
	p.cmd.Stdout = p.logs
	p.cmd.Stderr = p.logs
	setProcAttr(p.cmd)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start mrtr serve: %v", err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Error(err)
		}
	})
	select {
	case p.url = <-p.logs.url:
		return p
	case <-p.exited:
		t.Fatalf("mrtr serve %s exited before serving (%v):\n%s", strings.Join(args, " "), p.waitErr, tail(p.logs.String(), 40))
	case <-time.After(60 * time.Second):
		t.Fatalf("mrtr serve %s logged no \"mrtr serving\" line within 60 s:\n%s", strings.Join(args, " "), tail(p.logs.String(), 40))
	}
	return nil
}

// stop sends SIGTERM to the process and waits for it to exit (SIGKILL after
// 10 s). It reports an unclean exit or a data race the server logged. Only
// the first call does anything.
func (p *mnProc) stop() error {
	var err error
	p.stopOnce.Do(func() {
		pid := p.cmd.Process.Pid
		if e := p.cmd.Process.Signal(syscall.SIGTERM); e != nil && !errors.Is(e, os.ErrProcessDone) {
			_ = p.cmd.Process.Kill()
		}
		killed := false
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			killed = true
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		out := p.logs.String()
		var errs []error
		switch {
		case killed:
			errs = append(errs, fmt.Errorf("mrtr serve (pid %d) did not stop within 10 s of SIGTERM; killed. Log tail:\n%s", pid, tail(out, 40)))
		case p.waitErr != nil:
			errs = append(errs, fmt.Errorf("mrtr serve (pid %d) exited with %v after SIGTERM. Log tail:\n%s", pid, p.waitErr, tail(out, 40)))
		}
		if strings.Contains(out, "WARNING: DATA RACE") {
			errs = append(errs, fmt.Errorf("mrtr serve (pid %d) reported a data race:\n%s", pid, out))
		}
		err = errors.Join(errs...)
	})
	return err
}

// mnNode is one node of a cluster: a `mrtr serve` process that keeps its
// address across restarts, as it would behind a load balancer.
type mnNode struct {
	t    testing.TB
	name string
	addr string // 127.0.0.1:0 until the first start, then the port it got
	args []string
	env  []string
	proc *mnProc
}

// mnStartNode starts a node on a free port with args and extra environment.
func mnStartNode(t testing.TB, name string, env []string, args ...string) *mnNode {
	t.Helper()
	n := &mnNode{t: t, name: name, addr: "127.0.0.1:0"}
	n.start(env, args...)
	return n
}

func (n *mnNode) start(env []string, args ...string) {
	n.t.Helper()
	n.env, n.args = env, args
	n.proc = mnStart(n.t, n.addr, env, args...)
	if n.addr == "127.0.0.1:0" {
		u := strings.TrimSuffix(strings.TrimPrefix(n.proc.url, "http://"), "/mcp")
		if _, _, err := net.SplitHostPort(u); err != nil {
			n.t.Fatalf("node %s: url %q: %v", n.name, n.proc.url, err)
		}
		n.addr = u
	}
}

// url is the node's endpoint; it stays the same across restarts.
func (n *mnNode) url() string { return "http://" + n.addr + "/mcp" }

// pid is the process id of the node's current process.
func (n *mnNode) pid() int { return n.proc.cmd.Process.Pid }

// logs returns what the node's current process has logged.
func (n *mnNode) logs() string { return n.proc.logs.String() }

// restart stops the node's process by its id and starts a new one on the
// same port with the given environment and arguments.
func (n *mnNode) restart(env []string, args ...string) {
	n.t.Helper()
	old := n.pid()
	if err := n.proc.stop(); err != nil {
		n.t.Fatalf("node %s: %v", n.name, err)
	}
	n.start(env, args...)
	if n.pid() == old {
		n.t.Fatalf("node %s: restart kept pid %d", n.name, old)
	}
}

// mnClient is one go-sdk client connected to one node, with the automatic
// Multi Round-Trip loop disabled: the test sends each round itself, and
// may send it to another node.
type mnClient struct {
	cs *mcp.ClientSession
}

// mnTransport returns an HTTP transport of its own for a client, closed
// when the test ends.
func mnTransport(t testing.TB) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// mnConnect connects a 2026-07-28 go-sdk client to url through hc. The
// client declares elicitation (the demo tools ask only when the client can
// answer) but answers nothing itself.
func mnConnect(t testing.TB, url string, hc *http.Client) *mnClient {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "mrtr-e2e-multinode", Version: "1.0.0"}, &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return nil, errors.New("the test answers input requests by hand")
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != wire2026 {
		t.Fatalf("connect to %s: protocol version %q, want %s", url, got, wire2026)
	}
	return &mnClient{cs: cs}
}

// deployArgs are the arguments of every deploy flow of these tests.
func mnDeployArgs(service string) map[string]any {
	return map[string]any{"service": service, "env": "staging"}
}

// pauseDeploy sends round 1 of deploy and returns the requestState of the
// input_required result.
func (c *mnClient) pauseDeploy(ctx context.Context, service string) (string, error) {
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "deploy", Arguments: mnDeployArgs(service)})
	if err != nil {
		return "", err
	}
	if !res.NeedsInput() || res.RequestState == "" || res.InputRequests["confirm"] == nil {
		return "", fmt.Errorf("deploy round 1 did not pause: input required %v, %d input requests, text %q",
			res.NeedsInput(), len(res.InputRequests), goSDKText(res))
	}
	return res.RequestState, nil
}

// resumeDeploy sends round 2 of deploy: the approval and the echoed
// requestState. It returns the text of a complete, successful result.
func (c *mnClient) resumeDeploy(ctx context.Context, service, state string) (string, error) {
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      "deploy",
		Arguments: mnDeployArgs(service),
		InputResponses: mcp.InputResponseMap{
			"confirm": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}},
		},
		RequestState: state,
	})
	if err != nil {
		return "", err
	}
	text := goSDKText(res)
	if res.NeedsInput() || res.IsError {
		return "", fmt.Errorf("deploy round 2: input required %v, isError %v, text %q", res.NeedsInput(), res.IsError, text)
	}
	return text, nil
}

// mnDeployed is the text of a successful deploy of service.
func mnDeployed(service string) string { return "deployed " + service + " to staging" }

// mnRPCError returns the JSON-RPC error in err, and the reason of its data
// (empty if none).
func mnRPCError(err error) (je *jsonrpc.Error, reason string, ok bool) {
	if !errors.As(err, &je) {
		return nil, "", false
	}
	var data struct {
		Reason string `json:"reason"`
	}
	if len(je.Data) > 0 {
		_ = json.Unmarshal(je.Data, &data)
	}
	return je, data.Reason, true
}

// mnWantReject fails t unless err is the error contract's rejection with
// the given reason.
func mnWantReject(t testing.TB, what string, err error, reason string) {
	t.Helper()
	je, got, ok := mnRPCError(err)
	switch {
	case !ok:
		t.Errorf("%s: error %v (%T), want JSON-RPC error -32602 reason %s", what, err, err, reason)
	case je.Code != -32602 || je.Message != "invalid requestState" || got != reason:
		t.Errorf("%s: error %d %q data %s, want -32602 \"invalid requestState\" reason %s", what, je.Code, je.Message, je.Data, reason)
	}
}

// mnKid returns the key id in the clear-text prefix of a requestState,
// "v1.<kid>.<sealed>".
func mnKid(state string) string {
	parts := strings.SplitN(state, ".", 3)
	if len(parts) != 3 || parts[0] != "v1" {
		return "?"
	}
	return parts[1]
}

// mnMrtr runs the mrtr binary with args (keygen, keys ...) and fails t if
// it does not succeed.
func mnMrtr(t testing.TB, args ...string) {
	t.Helper()
	cmd := exec.Command(mrtrBin, args...)
	cmd.Env = serverEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mrtr %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// mnKeyRing writes a new key ring with one key, id, with `mrtr keygen`, and
// returns its path.
func mnKeyRing(t testing.TB, id string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys.json")
	mnMrtr(t, "keygen", "--id", id, "--out", path)
	return path
}

// mnRingIDs returns the key ids of a ring file, primary first.
func mnRingIDs(t testing.TB, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ring struct {
		Keys []struct {
			ID string `json:"id"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(data, &ring); err != nil {
		t.Fatalf("key ring %s: %v", path, err)
	}
	var ids []string
	for _, k := range ring.Keys {
		ids = append(ids, k.ID)
	}
	return ids
}

// mnPercentile returns the p-th percentile (0 < p <= 100, nearest rank) of
// sorted durations.
func mnPercentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100+0.999999) - 1
	rank = max(0, min(rank, len(sorted)-1))
	return sorted[rank]
}

// mnMillis formats d in milliseconds with two decimals.
func mnMillis(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + " ms"
}
