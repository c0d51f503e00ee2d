package serve

import (
	"testing"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
)

// runApp runs mrtr args in-process, as main runs mrtr serve.
func runApp(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return testcmd.Run(t, testcmd.Commands(Cmd), nil, args...)
}

// startServe runs `mrtr serve` in-process on a free loopback port and
// returns its /mcp URL and log.
func startServe(t *testing.T, args ...string) (string, *testcmd.Buffer) {
	t.Helper()
	return testcmd.Start(t, testcmd.Commands(Cmd), append([]string{"serve"}, args...)...)
}
