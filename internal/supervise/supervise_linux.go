package supervise

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/mrtr-go/mrtr/internal/stdio"
)

// selfExe names, in any process, the executable it runs.
const selfExe = "/proc/self/exe"

// Argv is the stdio.Config.Supervisor of the proxy's stdio
// upstreams: this very executable in its supervisor mode. It is started
// as /proc/self/exe, which in the forked child still names the proxy's
// executable: the same version as the proxy even once the file was
// replaced or removed (an upgrade in place), and reachable by an
// --upstream-user that may not search the directory it is in. Without
// /proc it is os.Executable(); nil when neither is found, and the
// command is then started directly.
func Argv() []string {
	if _, err := os.Stat(selfExe); err == nil {
		return []string{selfExe, Arg}
	}
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return []string{exe, Arg}
}

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER of prctl(2).
const prSetChildSubreaper = 36

// supervise is mrtr's supervisor mode, "mrtr __supervise PATH ARGV0
// [ARG...]", the child that stdio.Start runs with Config.Supervisor in
// place of a stdio upstream command.
//
// The parent-death signal that kills a child when the proxy dies (even by
// SIGKILL) reaches only the direct child: what the command starts in turn
// (npx's sh and node) would outlive the proxy. So the direct child is
// this supervisor, leader of the command's process group, with SIGUSR1 as
// its parent-death signal. On SIGUSR1 (the proxy died, or its Stop is
// past SIGTERM) it SIGKILLs, at once, its group and every process
// descended from it, what left the group (setsid) included
// (killDescendants), then itself; it does the same for what is left when
// the command exits. It is a child subreaper, so what the command's
// children leave behind when they exit stays its child and is reaped by
// it. It runs the command with its own stdin, stdout and stderr (no
// copying), and no other descriptor (closeOnExecFrom), and removes
// stdio.SupervisorParentVar from the command's environment. It is not
// dumpable.
//
// Where the kernel allows, the command runs in a PID namespace of its own
// whose init is a second instance of this supervisor (startConfined,
// superviseInit): the command cannot signal the supervisor (kill -9
// $PPID reaches the init, which ignores it), and when the supervisor
// dies, however, its init goes and the kernel kills every process of the
// namespace, what ran setsid included.
//
// SIGTERM, SIGINT and SIGHUP are caught and not passed on: the proxy
// signals the whole group (stdio), so the command has the same signal
// already, and a second one would ask many servers to quit at once
// instead of cleanly. Caught, they do not end the supervisor before its
// command, which would leave the command without its guard.
//
// It ends as its command did: with the same exit status, or killed by the
// same signal (reraise), so the proxy reads its child's end as if the
// command were its child. It returns only what the supervisor itself
// decided (a refusal, a command that could not start), or 128+N when
// signal N could not be raised again.
//
// args is PATH ARGV0 [ARG...]; environ is its environment.
func supervise(args []string, environ []string, stderr io.Writer) int {
	// Nothing the proxy inherited reaches the command: every descriptor
	// but 0-2 is closed on exec, before anything else can start one.
	closeOnExecFrom(3)
	// Catch the parent-death signal first: from here on it is not lost,
	// and the parent pid check below covers the time before.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	parent, initFD, pidns, env := -1, -1, true, make([]string, 0, len(environ))
	for _, kv := range environ {
		name, v, _ := strings.Cut(kv, "=")
		switch name {
		case stdio.SupervisorParentVar:
			if p, err := strconv.Atoi(v); err == nil && p > 0 {
				parent = p
			}
		case supervisorInitVar:
			if fd, err := strconv.Atoi(v); err == nil && fd > 2 {
				initFD = fd
			}
		case supervisorPIDNSVar:
			pidns = v != "off"
		default:
			env = append(env, kv)
		}
	}
	if parent < 0 || len(args) < 2 {
		fmt.Fprintln(stderr, "mrtr: "+Arg+" is internal to mrtr proxy; it is not a command")
		return 2
	}
	if initFD >= 0 && os.Getpid() == 1 {
		// Started by a supervisor as the init of the command's PID
		// namespace (see startConfined).
		return superviseInit(args, env, parent, initFD, stderr)
	}
	// Killing the group must not hit anyone else: the group is ours only
	// when we lead it (stdio starts us with Setpgid).
	if syscall.Getpgrp() != os.Getpid() {
		fmt.Fprintln(stderr, "mrtr: "+Arg+": not a process group leader")
		return 2
	}
	if os.Getppid() != parent {
		// The proxy died before SIGUSR1 was caught: nothing started yet.
		return 128 + int(syscall.SIGUSR1)
	}
	// Named mrtr in ps -o comm, not exe (it was started as /proc/self/exe):
	// /proc/self is the main thread, whichever thread this runs on.
	_ = os.WriteFile("/proc/self/comm", []byte("mrtr"), 0)
	// Not dumpable: a command of the same uid must not write this
	// process's memory (/proc/PID/mem), which would make it the
	// supervisor.
	_ = Undumpable()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		fmt.Fprintf(stderr, "mrtr: %s: prctl(PR_SET_CHILD_SUBREAPER): %v\n", Arg, errno)
	}

	cmd, initStatus, err := startConfined(args, env, pidns)
	if err != nil {
		fmt.Fprintf(stderr, "mrtr: start %q: %v\n", args[1], err)
		if errors.Is(err, fs.ErrNotExist) {
			return 127
		}
		return 126
	}
	pid := cmd.Process.Pid
	// The command has its own copies now: let go of stdin and stdout, so
	// the proxy sees stdout end when the command (and what it started)
	// closes it, not only when the supervisor exits.
	releaseStdio()

	// Reap every child: the command, and what it leaves behind as it
	// exits (reparented here, the subreaper); report the command's end.
	status := make(chan syscall.WaitStatus, 1)
	go func() {
		for waitAnyExited() {
			for {
				var ws syscall.WaitStatus
				p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if err == syscall.EINTR {
					continue
				}
				if err != nil || p <= 0 {
					break
				}
				if p == pid {
					status <- ws
				}
			}
		}
	}()

	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGUSR1 {
				// The proxy died, or stops the command by force:
				// everything the command started goes, at once, then
				// this supervisor.
				killDescendants()
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				return 128 + int(syscall.SIGKILL)
			}
			// SIGTERM, SIGINT, SIGHUP: the group's, the command has it too.
		case ws := <-status:
			if initStatus != nil {
				// The init of the command's namespace ended, and every
				// process of the namespace with it: the command's end is
				// what it reported, or else its own.
				ws = commandStatus(initStatus, ws)
			}
			// What the command leaves behind goes with it, even what
			// left the group (the proxy kills the group itself).
			killDescendants()
			if ws.Signaled() {
				reraise(ws.Signal())
				return 128 + int(ws.Signal())
			}
			return ws.ExitStatus()
		}
	}
}

// releaseStdio replaces stdin and stdout by /dev/null.
func releaseStdio() {
	if null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
		syscall.Dup3(int(null.Fd()), 0, 0)
		syscall.Dup3(int(null.Fd()), 1, 0)
		null.Close()
	}
}

// reraise ends the process by sig, as the command it ran was ended: the
// default action restored (raw rt_sigaction, beneath the runtime's
// handlers), sig unblocked on this thread and sent to it. No core is
// written (RLIMIT_CORE 0): the supervisor's would tell nothing. It
// returns only if sig did not end the process (one whose default action
// is not to terminate, which cannot have ended the command).
func reraise(sig syscall.Signal) {
	runtime.LockOSThread()
	syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
	var dfl [4]uint64 // struct sigaction, zeroed: SIG_DFL, no flags, empty mask (on every Linux layout)
	syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl[0])), 0, 8, 0, 0)
	set := uint64(1) << (uint(sig) - 1)
	const sigUnblock = 1 // SIG_UNBLOCK of rt_sigprocmask(2)
	syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, sigUnblock, uintptr(unsafe.Pointer(&set)), 0, 8, 0, 0)
	syscall.Tgkill(os.Getpid(), syscall.Gettid(), sig)
	// A terminating signal sent to this thread is delivered on the way
	// back from the system call: the process is gone by here. Should it
	// not be, wait a moment for it.
	time.Sleep(100 * time.Millisecond)
}

// waitAnyExited blocks until a child of the process has exited, without
// reaping it (waitid, P_ALL, WEXITED|WNOWAIT), and reports false when the
// process has no child left.
func waitAnyExited() bool {
	const pAll = 0
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pAll, 0,
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			return errno == 0
		}
	}
}

// killDescendants SIGKILLs every other process of this process's group
// and every descendant of this process, what left the group (setsid,
// setpgid) included. It reads the tree again until a pass finds none it
// has not signalled (a process killed forks no more; one that forked
// before is found on the next pass, and, this being a subreaper, so are
// the children of the killed, reparented here), or two seconds have
// passed. Each process is signalled through a pidfd opened before its
// ancestry is read again, so a pid reused meanwhile is never hit.
func killDescendants() {
	self := os.Getpid()
	deadline := time.Now().Add(2 * time.Second)
	killed := map[int]bool{}
	for {
		procs := readProcs()
		ours := map[int]bool{self: true}
		for changed := true; changed; { // the closure of "child of ours"
			changed = false
			for pid, p := range procs {
				if !ours[pid] && (ours[p.ppid] || p.pgrp == self) {
					ours[pid], changed = true, true
				}
			}
		}
		fresh := 0
		for pid := range ours {
			if pid != self && !killed[pid] {
				killed[pid] = true
				if killIfOurs(pid, func(p proc) bool { return ours[p.ppid] || p.pgrp == self }) {
					fresh++
				}
			}
		}
		if fresh == 0 || time.Now().After(deadline) {
			return
		}
	}
}

// proc is what killDescendants reads of a process in /proc/PID/stat.
type proc struct{ ppid, pgrp int }

// readProcs reads the parent and group of every live (not zombie) process.
func readProcs() map[int]proc {
	procs := map[int]proc{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return procs
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			procs[pid] = p
		}
	}
	return procs
}

// readProc reads /proc/PID/stat: false for a process gone or a zombie.
func readProc(pid int) (proc, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	return parseStat(string(b))
}

// parseStat reads the parent and group of a /proc/PID/stat line, "pid
// (comm) state ppid pgrp ...": false for a zombie or what it cannot read.
// comm is the process's to choose (16 bytes, ")" and spaces included);
// what follows its last ")" is the kernel's.
func parseStat(stat string) (proc, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return proc{}, false
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
		return proc{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return proc{}, false
	}
	return proc{ppid, pgrp}, true
}

// System call numbers of pidfd_open(2) and pidfd_send_signal(2), the
// same on every Linux architecture (but alpha's).
const (
	sysPidfdOpen       = 434
	sysPidfdSendSignal = 424
)

// killIfOurs SIGKILLs pid if, read after its pidfd is open, it is still
// a process that ours accepts, and reports whether it did. Without
// pidfds (before Linux 5.3) it reads and kills by pid.
func killIfOurs(pid int, ours func(proc) bool) bool {
	fd, _, errno := syscall.RawSyscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno == syscall.ENOSYS {
		if p, ok := readProc(pid); ok && ours(p) {
			return syscall.Kill(pid, syscall.SIGKILL) == nil
		}
		return false
	}
	if errno != 0 {
		return false // gone
	}
	defer syscall.Close(int(fd))
	if p, ok := readProc(pid); !ok || !ours(p) {
		return false
	}
	_, _, errno = syscall.RawSyscall6(sysPidfdSendSignal, fd, uintptr(syscall.SIGKILL), 0, 0, 0, 0)
	return errno == 0
}
