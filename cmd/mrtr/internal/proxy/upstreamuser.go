package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/internal/stdio"
	"github.com/mrtr-go/mrtr/internal/supervise"
)

// upstreamUserFlag registers --upstream-user: run a command upstream as
// another user, so that it can read neither the proxy's key file nor the
// proxy's memory and environment. Only root can do that.
func upstreamUserFlag(f *base.Flags, c *UpstreamConfig) {
	f.String(base.GroupUpstream, &c.user, "upstream-user", "",
		"run a command upstream as `USER[:GROUP]` (a name or a numeric id; needs the proxy to run as root), so that it cannot read the key ring: give it a HOME it can write with --upstream-env HOME=DIR")
	f.Check("upstream-user", func() error {
		if c.user == "" {
			return nil
		}
		if len(c.Command) == 0 {
			return base.FlagErr("upstream-user", "is for an upstream that is a command (after --)")
		}
		_, err := lookupUpstreamUser(c.user)
		return err
	})
}

// lookupUpstreamUser resolves --upstream-user, refusing it unless the
// proxy runs as root.
func lookupUpstreamUser(spec string) (*stdio.User, error) {
	u, err := stdio.LookupUser(spec, os.Geteuid())
	switch {
	case errors.Is(err, stdio.ErrNotRoot):
		return nil, fmt.Errorf("--upstream-user needs the proxy to run as root (it runs as uid %d)", os.Geteuid())
	case err != nil:
		return nil, base.FlagErr("upstream-user", "%v", err)
	}
	return u, nil
}

// upstreamUser is who a command upstream runs as: nil (the proxy's user)
// when spec is empty, with a warning when that user is root.
func upstreamUser(spec string, log *slog.Logger) (*stdio.User, error) {
	if spec == "" {
		if os.Geteuid() == 0 {
			log.Warn("mrtr proxy: the upstream command runs as root, like the proxy: it can read the key ring; give it a user of its own with --upstream-user")
		}
		warnEscapes(nil, log)
		return nil, nil
	}
	u, err := lookupUpstreamUser(spec)
	if err != nil {
		return nil, err
	}
	log.Info("mrtr proxy: the upstream command runs as another user", "uid", u.Uid, "gid", u.Gid, "groups", len(u.Groups))
	warnEscapes(u, log)
	return u, nil
}

// escapesMsg is the warning at start when the supervisor cannot run the
// upstream command, as u, in a PID namespace of its own.
const escapesMsg = "mrtr proxy: the upstream command cannot run in a PID namespace of its own: a process it starts can kill its supervisor and then outlive the proxy"

// warnEscapes says at start, when it is so, that the supervisor cannot
// run the command, as u, in a PID namespace of its own (the kernel or the
// sandbox refuses user or PID namespaces; see supervise).
func warnEscapes(u *stdio.User, log *slog.Logger) {
	if supervise.Argv() == nil {
		return
	}
	if err := supervise.Confinement(u); err != nil {
		log.Warn(escapesMsg, "error", err.Error())
	}
}
