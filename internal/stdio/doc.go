// Package stdio runs one MCP server as a child process and speaks the MCP
// stdio transport with it: newline-delimited UTF-8 JSON-RPC messages on the
// child's stdin and stdout, the child's logs on its stderr (MCP 2025-11-25
// and 2026-07-28, "Transports: stdio"). It owns the process and the framing,
// nothing more: what the messages mean is the caller's business.
//
// # Contract
//
//   - Start runs Config.Path with Config.Args directly, never through a
//     shell. The child's environment is the proxy's minus every variable
//     whose name starts with MRTR_ (the key ring is in MRTR_KEYS), plus
//     Config.Env; see Environ. With Config.User (the proxy running as
//     root) it runs as that user and its groups, so that it can read
//     neither the proxy's key file nor its /proc files.
//   - Send writes one message and a newline, whole, never interleaved with
//     another Send. A message must not contain a raw newline: one that does
//     is compacted if it is valid JSON and refused otherwise.
//   - Recv delivers every non-empty stdout line, without its line ending, in
//     order. A line longer than Config.MaxMessageBytes is a protocol error:
//     the child is stopped, Err reports ErrMessageTooLong, and no more than
//     about MaxMessageBytes is ever held for one line.
//   - Each stderr line is logged to Config.Logger under ChildRecordMsg,
//     the line itself as child.msg, with "pid" and "stream"="stderr", cut
//     to StderrLineBytes with a marker, at Info (at Warn for a line npm
//     marks as an error or a warning: "npm ERR!", "npm error", "npm WARN",
//     "npm warn"); a line that
//     is itself a structured log record (logfmt with level= and msg=, or
//     a JSON object with "level" and "msg", as log/slog and pino write
//     them) is logged under ChildRecordMsg at its own level, at most
//     MaxChildLevel, its message, level and other attributes, sanitised,
//     in the group "child" (child.msg, child.level). At most
//     Config.StderrBurst lines at once and Config.StderrRate a second
//     after that; the lines dropped beyond are counted in one Warn
//     record. What the child writes there is its own: the proxy's
//     secrets never reach it.
//   - Once Done is closed, Err says how the child ended (its exit status
//     or signal) and StderrTail the end of its stderr (TailLines lines,
//     TailBytes at most, every line, sanitised): why a child that ended
//     early did.
//   - Stop closes stdin (the spec's shutdown: the server should exit on EOF),
//     waits Config.StopGrace, sends SIGTERM to the child's process group,
//     waits StopGrace again, then SIGKILL. It always reaps the child.
//   - A child whose stdout ends is stopped the same way without being
//     asked: it can answer nothing more, and one that closed stdout and
//     lives on would otherwise hold its process slot forever.
//
// # No orphans, no zombies
//
// The child leads a process group of its own, so signals reach what it
// started too (npx starting node, say). When the child exits, on its own or
// stopped, whatever is left in its group is sent SIGKILL before the child is
// reaped (on Linux, where the exited child can be waited for without reaping
// it, so its group id cannot be reused in between), and the child is always
// waited for. A process that leaves the group (setsid, setpgid) is out of
// reach; one that still reads the child's stdin sees EOF when the proxy goes.
//
// On Linux the child also gets Pdeathsig = SIGKILL: it dies if the proxy
// dies, even by SIGKILL. Linux sends that signal when the thread that
// started the child exits, not the process, and Go may end threads (a
// goroutine that exits while locked to its thread ends it). So every child
// is forked from one goroutine locked to its thread, which never exits:
// the process keeps that one thread, parked between starts (ending it
// would also kill whatever else the process forked from that thread
// before, with Pdeathsig of its own). The children's exits are awaited on
// their pidfds in the runtime's poller, so a running child holds no thread
// of the proxy (without pidfds, one thread per child blocks in waitid).
// Pdeathsig does not reach the child's own children: they are killed with
// the group when the child ends while the proxy lives, and see stdin EOF
// when the proxy is gone. With Config.Supervisor (Linux) the child is a
// supervisor that runs the command and gets SIGUSR1 as its parent-death
// signal, on which it kills its whole group: then nothing in the group
// outlives the proxy (mrtr's supervisor is "mrtr __supervise", package
// internal/supervise, whose Init mrtr's main calls first).
//
// Other Unix systems get the process group but no Pdeathsig; on them the
// leftover group members are not killed after the child exits on its own,
// and a Stop racing with the child's own exit may signal its group id just
// after the reap (a window of microseconds in which the id could be reused).
// Start returns an error wrapping errors.ErrUnsupported elsewhere.
//
// # Concurrency
//
// Every method of Child is safe for concurrent use. A caller must keep
// receiving from Recv until it is closed, or call Stop: a receiver that
// stalls stalls the child (it blocks writing stdout), which is the
// back-pressure the transport needs. Call Stop once done with a Child even
// after it has exited: it releases what a stalled receiver holds.
package stdio
