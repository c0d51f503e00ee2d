package supervise

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/mrtr-go/mrtr/internal/stdio"
)

// Variables the supervisor reads and removes from the command's
// environment.
const (
	// supervisorInitVar tells a supervisor started as the init of the
	// command's PID namespace (pid 1 there) on which descriptor to write
	// the command's wait status. Anywhere else it is ignored.
	supervisorInitVar = stdio.ReservedPrefix + "SUPERVISOR_INIT"
	// supervisorPIDNSVar=off runs the command without a PID namespace of
	// its own (--upstream-env MRTR_SUPERVISOR_PIDNS=off): for a command
	// that must see its own pids in /proc, at the cost of the escape the
	// namespace closes.
	supervisorPIDNSVar = stdio.ReservedPrefix + "SUPERVISOR_PIDNS"
)

// probeArg is the hidden first argument of confinement's probe: "mrtr
// __supervise-probe" starts itself as startInit would start the init of
// a command's namespace, and exits 0 when it could (its child, pid 1 in
// the namespace, exits 0 at once).
const probeArg = "__supervise-probe"

// Confinement reports why the supervisor of a command run as u (nil: as
// this process) cannot run it in a PID namespace of its own, or nil when
// it can: it runs the probe (probeArg) as u, with an empty environment
// (this one may hold the key ring).
func Confinement(u *stdio.User) error {
	probe := exec.Command(selfExe, probeArg)
	probe.Env = []string{}
	if u != nil {
		probe.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.Uid, Gid: u.Gid, Groups: u.Groups}}
	}
	out, err := probe.CombinedOutput()
	if err != nil {
		if msg := strings.TrimSpace(string(out)); msg != "" {
			return fmt.Errorf("%s", strings.SplitN(msg, "\n", 2)[0])
		}
		return err
	}
	return nil
}

// probeConfinement is the probe's side of confinement: as the init of a
// fresh PID namespace (pid 1) it exits 0; otherwise it starts itself so,
// as startInit would, and says why it could not.
func probeConfinement(stderr io.Writer) int {
	if os.Getpid() == 1 {
		return 0
	}
	probe := exec.Command(selfExe, probeArg)
	probe.Env = []string{}
	probe.SysProcAttr = confinedAttr(os.Geteuid(), os.Getegid())
	if err := probe.Run(); err != nil {
		fmt.Fprintf(stderr, "%v\n", err)
		return 1
	}
	return 0
}

// startConfined starts the command, args being PATH ARGV0 [ARG...], with
// env, on this process's stdin, stdout and stderr. With pidns it tries
// first to start it in a PID namespace of its own (CLONE_NEWPID; unless
// this process runs as root, in a user namespace too, CLONE_NEWUSER, that
// maps this uid and gid to themselves and nothing else, never to root),
// under a second instance of this supervisor as the namespace's init
// (superviseInit); it then returns that init, and the read end of a pipe
// on which the init reports the command's wait status. Where the kernel
// refuses the namespaces it starts the command directly: a process the
// command starts can then escape (kill the supervisor, then setsid).
func startConfined(args, env []string, pidns bool) (*exec.Cmd, *os.File, error) {
	if pidns {
		if _, err := os.Stat(args[0]); err != nil {
			return nil, nil, err // the command's own error, said once
		}
		// Refused, the command runs directly: the proxy said so at start
		// (confinement), and its stderr is the command's, kept for the
		// command's own words.
		if init, status, err := startInit(args, env); err == nil {
			return init, status, nil
		}
	}
	cmd := &exec.Cmd{Path: args[0], Args: args[1:], Env: env,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	return cmd, nil, nil
}

// startInit starts this executable as the supervisor of args in a new PID
// namespace, its init (see startConfined).
func startInit(args, env []string) (*exec.Cmd, *os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer w.Close()
	initEnv := append(append(make([]string, 0, len(env)+2), env...),
		stdio.SupervisorParentVar+"="+strconv.Itoa(procSelfPID()), supervisorInitVar+"=3")
	init := &exec.Cmd{Path: selfExe, Args: append([]string{os.Args[0], Arg}, args...), Env: initEnv,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, ExtraFiles: []*os.File{w},
		SysProcAttr: confinedAttr(os.Geteuid(), os.Getegid())}
	if init.SysProcAttr.Cloneflags&syscall.CLONE_NEWUSER != 0 {
		// The child of a non-dumpable process is born so, and its
		// uid_map is then root's to write, not ours: dumpable for as
		// long as it takes to start it (it execs at once, which makes
		// it dumpable by itself; its init makes it non-dumpable again).
		setDumpable(true)
		defer setDumpable(false)
	}
	if err := init.Start(); err != nil {
		r.Close()
		return nil, nil, err
	}
	return init, r, nil
}

// confinedAttr is the SysProcAttr of a process started in a PID namespace
// of its own as a process of uid and gid: CLONE_NEWPID, with
// CLONE_NEWUSER mapping uid and gid to themselves unless uid is root; its
// parent's death kills it (SIGKILL, which the kernel delivers to a
// namespace's init from outside it) and with it the namespace.
func confinedAttr(uid, gid int) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
	if uid != 0 {
		a.Cloneflags |= syscall.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	}
	return a
}

// commandStatus is the command's wait status as the init of its
// namespace reported it on status (closed here), or, when it reported
// none (it could not start the command, or was killed), the init's own
// end, ws.
func commandStatus(status *os.File, ws syscall.WaitStatus) syscall.WaitStatus {
	defer status.Close()
	var b [4]byte
	if _, err := io.ReadFull(status, b[:]); err != nil {
		return ws
	}
	return syscall.WaitStatus(binary.LittleEndian.Uint32(b[:]))
}

// superviseInit is the supervisor as the init of the command's PID
// namespace (pid 1 there), started by the supervisor proper, parent, with
// the pipe statusFD to report the command's end on. It runs the command
// as its child and reaps every process of the namespace (all are
// reparented to it), and when the command exits it writes the command's
// wait status to statusFD and exits: the kernel then kills every process
// left in the namespace. The signals a namespace's init can get from
// within it (kill -9 $PPID of the command) do nothing: the kernel drops
// SIGKILL and SIGSTOP, and it catches the rest, which are the command's
// process group's (the command has them too) or the command's own
// attempts.
func superviseInit(args, env []string, parent, statusFD int, stderr io.Writer) int {
	// Caught, not ignored: a caught signal is the default again in the
	// command after exec, an ignored one would stay ignored.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM, syscall.SIGINT,
		syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGALRM, syscall.SIGPIPE)
	// Our parent, as the /proc mounted here names it (the namespace has
	// no pid for it; parent is its pid as the same /proc names it, see
	// procSelfPID). Gone already, nothing starts.
	if p, ok := readSelf(); ok && p.ppid != parent {
		return 128 + int(syscall.SIGKILL)
	}
	_ = os.WriteFile("/proc/self/comm", []byte("mrtr"), 0)
	_ = Undumpable()
	status := os.NewFile(uintptr(statusFD), "status")
	cmd := &exec.Cmd{Path: args[0], Args: args[1:], Env: env,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "mrtr: start %q: %v\n", args[1], err)
		if errors.Is(err, fs.ErrNotExist) {
			return 127
		}
		return 126
	}
	releaseStdio()
	for {
		var ws syscall.WaitStatus
		p, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 126 // no child left, the command's end unseen: cannot happen
		}
		if p == cmd.Process.Pid {
			var b [4]byte
			binary.LittleEndian.PutUint32(b[:], uint32(ws))
			status.Write(b[:])
			return 0
		}
	}
}

// readSelf reads this process's /proc/self/stat: its parent and group as
// the /proc mounted here names them.
func readSelf() (proc, bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return proc{}, false
	}
	return parseStat(string(b))
}

// procSelfPID is this process's pid as the /proc mounted here names it
// (the first field of /proc/self/stat), which the init of a PID namespace
// reads its parent by; os.Getpid() where /proc cannot tell.
func procSelfPID() int {
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if pid, err := strconv.Atoi(f[0]); err == nil {
				return pid
			}
		}
	}
	return os.Getpid()
}

// setDumpable sets the process's dumpable flag (prctl PR_SET_DUMPABLE).
func setDumpable(on bool) {
	v := uintptr(0)
	if on {
		v = 1
	}
	syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, v, 0)
}

// sysCloseRange is close_range(2)'s number, the same on every Linux
// architecture; closeRangeCloexec is its CLOSE_RANGE_CLOEXEC flag.
const (
	sysCloseRange     = 436
	closeRangeCloexec = 1 << 2
)

// closeOnExecFrom marks every descriptor from fd on close-on-exec:
// close_range(fd, ~0, CLOSE_RANGE_CLOEXEC) (Linux 5.11), or else each
// descriptor /proc/self/fd lists. It does not close them: the runtime's
// own (epoll, its pipes) stay open here, and are close-on-exec already.
func closeOnExecFrom(fd int) {
	if _, _, errno := syscall.Syscall(sysCloseRange, uintptr(fd), ^uintptr(0), closeRangeCloexec); errno == 0 {
		return
	}
	closeOnExecFromProc(fd)
}

// closeOnExecFromProc is closeOnExecFrom without close_range.
func closeOnExecFromProc(fd int) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n >= fd {
			syscall.CloseOnExec(n)
		}
	}
}
