package proxy

import (
	"context"
	"net/url"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
)

// auditUpstream is how a proxy's audit lines name its upstream: the URL
// as upstreamShown gives it, or the command it runs.
func auditUpstream(c *Config) string {
	if len(c.Command) > 0 {
		return "command " + base.CommandName(c.Command)
	}
	if c.runner != "" {
		return "runner " + c.runner
	}
	return upstreamShown(c.Upstream)
}

// upstreamShown is how the logs and the audit trail name an upstream URL:
// its scheme, host and path only. Userinfo, the query and the fragment are
// left out, whatever they hold: url.URL.Redacted masks only a password,
// and an API key rides in a query (?api_key=...) as often. A value that
// does not parse is shown as "".
func upstreamShown(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String()
}

// auditRefusalsOnly is the Auditor of the replicas' first check of a
// resume (replicas.go): it records a token refused there, which goes no
// further, and nothing else; the guard that serves the call records its
// accepted resume, its pauses and its answer.
type auditRefusalsOnly struct{ next mrtr.Auditor }

func (a auditRefusalsOnly) Resumed(ctx context.Context, e mrtr.ResumeEvent) error {
	if e.Outcome == mrtr.OutcomeOK {
		return nil
	}
	return a.next.Resumed(ctx, e)
}

func (auditRefusalsOnly) Paused(context.Context, mrtr.PauseEvent) error { return nil }

func (auditRefusalsOnly) Ended(context.Context, mrtr.EndEvent) error { return nil }
