//go:build !linux

package e2e

import (
	"errors"
	"time"
)

// loadCPU is only implemented on Linux; TestLoad then reports no CPU times.
func loadCPU(pid int) (time.Duration, error) {
	return 0, errors.New("CPU time per process is only read on Linux")
}
