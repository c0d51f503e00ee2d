// Package proctest helps tests that run processes as mrtr runs them: as
// the unprivileged user nobody, from a copy of the test binary that user
// may run, and in PID namespaces of their own.
package proctest

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Nobody is the unprivileged uid and gid these tests run processes as
// when they run as root.
const Nobody = 65534

// OuterPID is sh that sets $pid to the shell's pid as the process that
// runs the test reads it in /proc: in a PID namespace of its own $$ and
// $! are the namespace's pids, not the test's.
const OuterPID = `read -r s </proc/self/stat; pid=${s%% *}; `

// ExposedBinary returns a copy of this test binary that nobody may run
// (go test builds it in a directory only its user can enter). The copy is
// removed at cleanup.
func ExposedBinary(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mrtr-procsec-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	path := filepath.Join(dir, "mrtr")
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// Alive reports whether pid exists and is not a zombie (a zombie has
// exited; it waits only for whoever reaps it), from /proc/PID/stat.
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	stat := string(b)
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(stat[i+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}
