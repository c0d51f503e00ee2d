// Package runner separates the proxy, which holds the key ring, from the
// upstream command it fronts, which it did not write: the command runs in
// a runner, a process of another uid that holds no secret, and the proxy
// reaches each child of it over a Unix socket (privilege separation, as
// OpenSSH's privsep and Postfix's split processes do).
//
// # Contract
//
//   - Listen creates the socket with mode 0660 and the group asked for;
//     a socket file left by a runner that is gone is removed, a path that
//     is not a socket, or one another runner listens at, is refused.
//   - A Server runs one fresh child (stdio.Start, supervised as the
//     proxy's own children are) for each connection it accepts, started
//     with the peer's first message (a connection that closes before it
//     starts none), whose stdin and stdout are that connection: each line the peer sends is
//     one message to the child, each message of the child one line to the
//     peer. When the connection closes the child is stopped; when the
//     child ends the connection is closed.
//   - The peer's uid (SO_PEERCRED, read by the kernel at connect) must be
//     one of Options.AllowUIDs, unless Options.AllowAny; the runner's own
//     uid, which its children share, and the overflow uid 65534 (a peer
//     of another user namespace, unmapped) are always refused. A refusal
//     closes the connection at once and is logged as a warning,
//     rate-limited; so is a connection beyond Options.MaxChildren.
//   - Shutdown stops accepting, waits for the open connections to end,
//     and stops the children left once its context ends.
//   - Dial is the proxy's side: a Conn is one child of the runner, with
//     the same Send and Recv as a stdio.Child, and Close.
//
// A runner holds no secret, but its children share its uid: one child
// can trace or signal a sibling serving another caller, or the runner.
// The runner marks itself non-dumpable (the command does it, not this
// package), so a child cannot trace the runner itself.
package runner
