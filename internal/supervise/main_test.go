package supervise

import (
	"os"
	"testing"
)

// TestMain lets this test binary be the supervisor the tests start:
// run as "BINARY __supervise ...", it is one (Init), as mrtr is.
func TestMain(m *testing.M) {
	Init()
	os.Exit(m.Run())
}
