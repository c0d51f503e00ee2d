//go:build !unix

package bench

import "time"

// processCPU returns 0: CPU time is only read on Unix systems.
func processCPU() time.Duration { return 0 }
