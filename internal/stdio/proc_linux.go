package stdio

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"unsafe"
)

const supported = true

// sysProcAttr puts the child in a process group of its own (its pid is the
// group id), has the kernel SIGKILL it when the thread that started it
// exits (the spawner's thread, which outlives every child it started: in
// effect when the proxy dies), and asks for a pidfd in *pidfd (-1 when the
// kernel has none), so its exit can be awaited without a thread.
func sysProcAttr(pidfd *int) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, PidFD: pidfd}
}

// spawner is the one thread that forks every child of the process.
//
// Pdeathsig fires when the thread that forked the child exits, and Go ends
// a thread whenever a goroutine locked to it returns, so the forking thread
// must be one that is kept. One goroutine locked to its thread does every
// fork while any child it started lives; it exits (ending the thread) only
// once the last of them is reaped, and the next Start makes a new one. A
// thread per child would cost each child an OS thread and its two runtime
// stacks (about 48 KiB) for as long as it runs.
//
// It is the package's only state, and has to be: the thread is the
// process's, shared by every Child however it was configured.
type spawner struct {
	mu   sync.Mutex
	reqs chan spawnReq // nil while no thread runs
	live int           // children started and not yet reaped, and starts under way
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan<- error
}

var spawn spawner

// startCmd starts cmd on the spawner's thread. When it returns nil, the
// caller must call endCmd once the child is reaped.
func startCmd(cmd *exec.Cmd) error {
	spawn.mu.Lock()
	if spawn.reqs == nil {
		spawn.reqs = make(chan spawnReq)
		go spawnLoop(spawn.reqs)
	}
	spawn.live++
	reqs := spawn.reqs
	spawn.mu.Unlock()
	done := make(chan error, 1)
	reqs <- spawnReq{cmd, done} // not closed before endCmd below: live counts this start
	err := <-done
	if err != nil {
		endCmd()
	}
	return err
}

// endCmd tells the spawner a child it started is reaped; after the last
// one its thread ends.
func endCmd() {
	spawn.mu.Lock()
	defer spawn.mu.Unlock()
	if spawn.live--; spawn.live == 0 {
		close(spawn.reqs)
		spawn.reqs = nil
	}
}

func spawnLoop(reqs <-chan spawnReq) {
	runtime.LockOSThread()
	// Never unlocked: the thread ends with this goroutine, once no child
	// it forked is left.
	for r := range reqs {
		r.done <- r.cmd.Start()
	}
}

// pPID and pPIDFD are P_PID and P_PIDFD of waitid(2).
const (
	pPID   = 1
	pPIDFD = 3
)

// waitExited blocks until the child has exited, without reaping it (waitid
// with WNOWAIT, as os.Process.Wait does for the same reason), and reports
// whether it could. With a pidfd it waits in the runtime's poller, so no
// thread is held meanwhile; the pidfd is closed on return. Without one, a
// thread blocks in waitid until the child exits.
func waitExited(pidfd, pid int) bool {
	if pidfd >= 0 {
		exited, err := pollExited(pidfd)
		if err == nil {
			return exited
		}
	}
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			return errno == 0
		}
	}
}

// errNotPollable: the pidfd could not be waited for in the poller.
var errNotPollable = errors.New("pidfd not pollable")

// pollExited waits for pidfd to become readable (the process exited) in
// the runtime's poller, then checks with waitid, WNOHANG and WNOWAIT. It
// closes pidfd.
func pollExited(pidfd int) (bool, error) {
	if err := syscall.SetNonblock(pidfd, true); err != nil {
		syscall.Close(pidfd)
		return false, errNotPollable
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return false, errNotPollable
	}
	exited, failed := false, false
	err = rc.Read(func(fd uintptr) bool {
		var info [128]byte // siginfo_t, zeroed: WNOHANG leaves it so while the child runs
		for {
			_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPIDFD, fd,
				uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT|syscall.WNOHANG, 0, 0)
			switch errno {
			case syscall.EINTR:
				continue
			case 0:
				// si_signo, the first int of siginfo_t on every Linux, is
				// SIGCHLD once the child has exited.
				exited = *(*int32)(unsafe.Pointer(&info[0])) != 0
				return exited
			case syscall.EAGAIN:
				return false
			default:
				failed = true
				return true
			}
		}
	})
	if err != nil {
		// Not in the poller (f is not pollable): the caller falls back to a
		// blocking wait by pid, which needs no pidfd.
		return false, errNotPollable
	}
	return exited && !failed, nil
}

// signalGroup sends SIGTERM, or SIGKILL, to the process group pgid.
func signalGroup(pgid int, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	syscall.Kill(-pgid, sig)
}
