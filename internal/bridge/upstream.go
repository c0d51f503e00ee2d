package bridge

import (
	"context"
	"strings"

	"github.com/mrtr-go/mrtr/internal/rpc"
)

// Upstream is one connection to the legacy upstream: a child process
// over stdio, or one HTTP session. Close ends it (stops the child) and
// returns once it is gone.
type Upstream interface {
	rpc.Transport
	Close(ctx context.Context) error
}

// authorizer is an Upstream that sends its caller's Authorization header
// (HTTPSession); open hands it the one of the request it opens for.
type authorizer interface {
	authorize(string)
}

// exitReporter is an upstream that says how it ended once closed: a
// command's child (stdio.Child).
type exitReporter interface {
	Err() error
	StderrTail() []string
}

// exitStatusOf is how up ended ("exit status 0", "signal: terminated"),
// or "" when up does not say.
func exitStatusOf(up Upstream) string {
	x, ok := up.(exitReporter)
	if !ok {
		return ""
	}
	if err := x.Err(); err != nil {
		return err.Error()
	}
	return "exit status 0"
}

// exitAttrs are the log attributes of how a closed upstream ended, when
// it says: "exit" (its exit status or signal) and, unless it exited 0,
// "stderr_tail" (the end of its stderr).
func exitAttrs(up Upstream) []any {
	x, ok := up.(exitReporter)
	if !ok {
		return nil
	}
	attrs := []any{"exit", exitStatusOf(up)}
	if x.Err() != nil {
		attrs = append(attrs, "stderr_tail", strings.Join(x.StderrTail(), "\n"))
	}
	return attrs
}
