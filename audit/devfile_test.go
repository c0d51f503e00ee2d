package audit_test

import (
	"os"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/audit"
)

// TestSealedOpenDevice: OpenFile with a Signer on a device that is not a
// regular file (/dev/full, whose reads never end and whose writes fail)
// does not scan it for a trail to go on with, and returns a Writer
// whose failed first checkpoint was told to OnError, as a round-one
// Writer does with its lines: with Required, the calls are refused one
// by one (mrtr serve --audit-required fails closed, it does not exit).
func TestSealedOpenDevice(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	n := newNode(t, "n1")
	type out struct {
		w   *audit.Writer
		err error
	}
	for _, required := range []bool{false, true} {
		o := n.opts(n.signer())
		o.Required = required
		failed := 0
		o.OnError = func(error) { failed++ }
		done := make(chan out, 1)
		go func() { w, err := audit.OpenFile("/dev/full", o); done <- out{w, err} }()
		select {
		case r := <-done:
			if r.err != nil || failed == 0 {
				t.Fatalf("required %v: OpenFile: %v, %d errors told", required, r.err, failed)
			}
			if r.w != nil {
				r.w.Close()
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("required %v: OpenFile(/dev/full) still running after 10s", required)
		}
	}
}
