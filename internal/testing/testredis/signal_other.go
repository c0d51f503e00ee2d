//go:build !unix

package testredis

import "os"

// Without SIGSTOP and SIGCONT, Pause and Resume skip the test.
var sigStop, sigCont os.Signal

// terminate kills p: there is no SIGTERM.
func terminate(p *os.Process) error { return p.Kill() }
