package proxy

import (
	"os"
	"testing"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/serve"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
)

func TestMain(m *testing.M) {
	testcmd.Init() // this binary supervises the upstreams it runs, or is one
	os.Exit(m.Run())
}

// runApp runs mrtr args in-process, as main runs mrtr proxy.
func runApp(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return testcmd.Run(t, testcmd.Commands(Cmd), nil, args...)
}

// startProxyCmd runs `mrtr proxy` in-process on a free loopback port and
// returns its /mcp URL and log.
func startProxyCmd(t *testing.T, args ...string) (string, *testcmd.Buffer) {
	t.Helper()
	return testcmd.Start(t, testcmd.Commands(Cmd), append([]string{"proxy"}, args...)...)
}

// startServe runs `mrtr serve` in-process on a free loopback port, an
// upstream for the proxy, and returns its /mcp URL and log.
func startServe(t *testing.T, args ...string) (string, *testcmd.Buffer) {
	t.Helper()
	return testcmd.Start(t, testcmd.Commands(serve.Cmd), append([]string{"serve"}, args...)...)
}
