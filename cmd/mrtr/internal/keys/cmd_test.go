package keys

import (
	"testing"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
)

// runApp runs mrtr args in-process, as main runs mrtr keygen and mrtr
// keys.
func runApp(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return testcmd.Run(t, testcmd.Commands(KeygenCmd, Cmd), nil, args...)
}
