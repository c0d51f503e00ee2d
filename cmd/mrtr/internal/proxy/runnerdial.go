package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/internal/runner"
)

// runnerFlag registers --runner.
func runnerFlag(f *base.Flags, c *UpstreamConfig) {
	f.String(base.GroupUpstream, &c.runner, "runner", "", "path of the Unix `SOCKET` of an mrtr runner, which runs the upstream command under another uid (one child per connection): the proxy starts no process itself, and the command never shares the key ring's uid. Not with --upstream or a command after --")
	f.Check("runner", func() error {
		switch {
		case c.runner == "":
			return nil
		case len(c.env) > 0:
			return base.FlagErr("upstream-env", "has no effect with --runner: the runner's command gets the runner's environment")
		}
		return nil
	})
}

// runnerStartTimeout bounds the start's check that the runner answers.
const runnerStartTimeout = 10 * time.Second

// runnerDial is childDial for --runner: each child a connection to the
// runner. Unless the era probe's own connection shows it, the start
// checks that the runner is there: a proxy whose runner is missing
// stops with an error naming the socket.
func (c *UpstreamConfig) runnerDial(ctx context.Context, log *slog.Logger) (string, *slog.Logger, func(context.Context) (bridge.Upstream, error), error) {
	name := "runner " + c.runner
	childLog := log.With("upstream", name)
	dial := func(ctx context.Context) (bridge.Upstream, error) {
		rc, err := runner.Dial(ctx, c.runner, runner.DialOptions{})
		if err != nil {
			return nil, err
		}
		childLog.Debug("bridge: upstream process started (a connection to the runner)")
		return rc, nil
	}
	if c.era != eraAuto {
		cctx, cancel := context.WithTimeout(ctx, runnerStartTimeout)
		defer cancel()
		up, err := dial(cctx)
		if err != nil {
			return "", nil, nil, fmt.Errorf("--runner: %w", err)
		}
		_ = up.Close(cctx)
	}
	return name, childLog, dial, nil
}
