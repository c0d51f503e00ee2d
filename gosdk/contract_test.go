package gosdk_test

import (
	"testing"

	"github.com/mrtr-go/mrtr/internal/testing/adaptertest"
)

// TestContract runs the guard's whole contract, the table every adapter
// shares, through a go-sdk server over loopback HTTP.
func TestContract(t *testing.T) {
	adaptertest.Run(t, serve)
}
