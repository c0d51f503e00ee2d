package supervise

import (
	"testing"
)

// TestUndumpable: undumpable clears the process's dumpable flag, as
// PR_GET_DUMPABLE reads it.
func TestUndumpable(t *testing.T) {
	if err := Undumpable(); err != nil {
		t.Fatal(err)
	}
	if d, err := Dumpable(); err != nil || d {
		t.Fatalf("dumpable after undumpable: %v, %v", d, err)
	}
}
