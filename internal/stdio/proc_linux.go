package stdio

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

const supported = true

// supervisorSupported: Config.Supervisor is honoured (see sysProcAttr).
const supervisorSupported = true

// supervisorDeathSignal is a supervisor's parent-death signal, also sent
// by Stop when the command did not end on SIGTERM.
const supervisorDeathSignal = syscall.SIGUSR1

// sysProcAttr puts the child in a process group of its own (its pid is the
// group id), has the kernel SIGKILL it when the thread that started it
// exits (the spawner's thread, which outlives every child it started: in
// effect when the proxy dies), and asks for a pidfd in *pidfd (-1 when the
// kernel has none), so its exit can be awaited without a thread. With u
// it runs as that user (the parent-death signal survives the change of
// credentials: Go sets it after setuid in the child).
//
// A supervisor (Config.Supervisor) gets SIGUSR1 instead: the parent-death
// signal reaches only the direct child, so the supervisor must catch it
// and kill the rest of its group, which SIGKILL would not let it do.
// Until the supervisor's runtime catches it, SIGUSR1 either terminates it
// (the default action) or is dropped; the supervisor then finds its
// parent gone by its parent pid (SupervisorParentVar), before it starts
// the command.
func sysProcAttr(pidfd *int, u *User, supervisor bool) *syscall.SysProcAttr {
	death := syscall.SIGKILL
	if supervisor {
		death = supervisorDeathSignal
	}
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: death, PidFD: pidfd, Credential: credential(u)}
}

// spawner is the one thread that forks every child of the process.
//
// Pdeathsig fires when the thread that forked the child exits, and Go ends
// a thread whenever a goroutine locked to it returns, so the forking thread
// must be one that is kept. One goroutine, locked to its thread from the
// first Start on, does every fork, and never returns: its thread lives as
// long as the process. It must not end even once no child is left: the
// goroutine locks whatever thread it was running on, which may have forked
// other children of the process before (anyone's os/exec with Pdeathsig,
// a test's redis-server), and ending it would kill those. A thread per
// child would cost each child an OS thread and its two runtime stacks
// (about 48 KiB) for as long as it runs; this costs one thread, parked.
//
// It is the package's only state, and has to be: the thread is the
// process's, shared by every Child however it was configured.
type spawner struct {
	once sync.Once
	reqs chan spawnReq
	tid  atomic.Int32 // the spawner thread's id, once it runs
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan<- error
}

var spawn spawner

// startCmd starts cmd on the spawner's thread. When it returns nil, the
// caller must call endCmd once the child is reaped.
func startCmd(cmd *exec.Cmd) error {
	spawn.once.Do(func() {
		spawn.reqs = make(chan spawnReq)
		go spawnLoop(spawn.reqs)
	})
	done := make(chan error, 1)
	spawn.reqs <- spawnReq{cmd, done}
	return <-done
}

// endCmd has nothing to release: the spawner's thread is kept.
func endCmd() {}

func spawnLoop(reqs <-chan spawnReq) {
	runtime.LockOSThread() // never unlocked, and the loop never ends (see spawner)
	spawn.tid.Store(int32(syscall.Gettid()))
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

// signalSupervisor sends the supervisor pid its parent-death signal.
func signalSupervisor(pid int) bool { return syscall.Kill(pid, supervisorDeathSignal) == nil }

// signalGroup sends SIGTERM, or SIGKILL, to the process group pgid.
func signalGroup(pgid int, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	syscall.Kill(-pgid, sig)
}
