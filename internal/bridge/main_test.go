//go:build unix

package bridge_test

import (
	"os"
	"testing"
)

// serverVar makes the test binary act as an upstream server (see
// runBenchServer). Its name must not start with MRTR_: those never reach
// a child.
const serverVar = "BRIDGE_TEST_SERVER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(serverVar); mode != "" {
		os.Exit(runBenchServer(mode))
	}
	os.Exit(m.Run())
}
