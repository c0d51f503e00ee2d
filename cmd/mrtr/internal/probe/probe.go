package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/clientcmd"
	mrtrprobe "github.com/mrtr-go/mrtr/internal/probe"
	"github.com/mrtr-go/mrtr/internal/stdio"
	"github.com/mrtr-go/mrtr/internal/supervise"
	"github.com/mrtr-go/mrtr/internal/termtext"
)

const probeSynopsis = "mrtr probe URL [--tool NAME [--other-tool NAME]] [--arg k=v ...] [--answers FILE] [--bearer T --bearer-other T2] [--wait DURATION] [--max-requests 200] [--rate DURATION] [--json]\n       mrtr probe [flags] [--env K=V ...] -- COMMAND [ARG...]"

const probeHelp = `
Check, from the outside, how the MCP server at URL (Streamable HTTP, e.g.
http://localhost:8080/mcp), or the one COMMAND runs (stdio), protects the
requestState of its paused calls (MCP 2026-07-28 Multi Round-Trip
Requests): whether a client can read it, and whether the server refuses
it tampered with, moved to another tool or method, with other arguments,
replayed, sent by another caller, after its lifetime (--wait), oversized
or not a string, and in which shape.

-- COMMAND [ARG...] starts the server as a child process (directly, never
through a shell; its environment this one's minus every MRTR_* variable,
plus --env) and stops it at the end. Its era is found with
server/discover; stdio has one caller, so another_caller is skipped.

THIS CALLS THE SERVER'S TOOLS. Without --tool it calls every listed tool,
in order, until one pauses twice the same way with a requestState and a
second one does; each check then pauses that tool again, once, and after
its altered retry ends that flow: the original state sent back honestly
(same caller, tool and arguments) with every input request declined, and
again while the server pauses (at most 4 rounds), so that a server, or a
bridging proxy's child process, holds nothing for the probe once a check
is done. For moved it also gets listed prompts and reads listed resources
(at most 5 of each) to find one that pauses.
Every input request is answered with a
refusal (decline; sampling gets a fixed text, roots an empty list), so a
server that accepts a forged state runs its decline path, which shows the
acceptance without the side effect. --answers FILE, a JSON object of input
responses by input request key, replaces those refusals (to reach a path
that runs only when accepted); the declines that end each flow ignore it.
At most --max-requests requests are sent, those that end the flows
included ("N requests, M more to end the paused flows"), --rate apart. Point it at servers you may call.

Required arguments are filled from the tool's input schema (an enum's first
value, the default, else a placeholder of the right type); --arg k=v sets
one (v is JSON if it parses as JSON, else a string).

Prints a table (--json: {"checks": [{"name", "verdict", "detail"}, ...]},
with "incomplete" and "unchecked" as below); verdicts are pass, FAIL,
warn and skip. What the server chose (names, messages, texts) is shown
without terminal controls; --json keeps it exact. Redirects are not
followed: one is reported, and the probe stops. Exit status:
  0  every check ran, none failed (a check may be skipped for a flag not
     given: --other-tool, --bearer-other, --wait)
  1  a check failed, or the probe could not run (no answer, a redirect,
     --tool that does not pause twice the same way)
  2  a usage error
  3  nothing could be checked: a 2025-11-25 server (it cannot pause at
     all), or no tool that pauses twice the same way with a requestState
  4  incomplete: tampered, moved or arguments_changed was skipped or
     inconclusive for a reason other than a flag not given ("incomplete"
     in --json)

Flags:
`

// probeExamples end mrtr probe --help.
const probeExamples = `  mrtr probe http://127.0.0.1:8080/mcp
  mrtr probe http://127.0.0.1:8080/mcp --tool deploy --other-tool transfer --json
  mrtr probe https://mcp.example.com/mcp --bearer "$T1" --bearer-other "$T2" --wait 6m
  mrtr probe -- npx -y @modelcontextprotocol/server-everything
`

// Cmd is mrtr probe.
var Cmd = &base.Command{Name: "probe", Run: probe}

func probe(ctx context.Context, a *base.App, args []string) error {
	if err := supervise.Undumpable(); err != nil { // before any child (probe -- COMMAND): $MRTR_BEARER stays out of its reach
		return err
	}
	fs := a.NewFlagSet("probe", probeSynopsis)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n%s", probeSynopsis, probeHelp)
		base.PrintDefaults(fs)
		fmt.Fprintf(fs.Output(), "\nExamples:\n%s", probeExamples)
	}
	var kvs []string
	fs.Func("arg", "an argument `k=v` of --tool (repeatable)", func(s string) error {
		if k, _, ok := strings.Cut(s, "="); !ok || k == "" {
			return errors.New("want k=v")
		}
		kvs = append(kvs, s)
		return nil
	})
	tool := fs.String("tool", "", "the tool `NAME` to pause (default: the first that pauses with a requestState)")
	other := fs.String("other-tool", "", "with --tool: a second pausable tool `NAME` for the moved check")
	answersFile := fs.String("answers", "", "a JSON `FILE` of input responses by input request key, used instead of decline")
	bearer := fs.String("bearer", "", "the bearer `token` of the first caller ($MRTR_BEARER)")
	bearerOther := fs.String("bearer-other", "", "the bearer `token` of a second caller, for another_caller ($MRTR_BEARER_OTHER)")
	wait := fs.Duration("wait", 0, "for expired: retry a state after this long (longer than the server's state lifetime; 0: skip)")
	maxReq := fs.Int("max-requests", mrtrprobe.DefaultMaxRequests, "send at most this many requests")
	rate := fs.Duration("rate", 0, "wait at least this long between two requests")
	timeout := fs.Duration("timeout", mrtrprobe.DefaultTimeout, "give up on an answer after this long")
	asJSON := fs.Bool("json", false, "write the report as JSON")
	var env []string
	fs.Func("env", "with -- COMMAND: `K=V` added to the server's environment (repeatable)", func(s string) error {
		if k, _, ok := strings.Cut(s, "="); !ok || k == "" {
			return errors.New("want K=V")
		}
		env = append(env, s)
		return nil
	})
	var command []string
	for i, s := range args {
		if s == "--" {
			args, command = args[:i], args[i+1:]
			break
		}
	}
	pos, err := a.Parse(fs, args)
	if err != nil {
		return err
	}
	stdioMode := len(command) > 0
	switch {
	case stdioMode && len(pos) != 0:
		fmt.Fprintf(a.Stderr, "mrtr probe: a URL or -- COMMAND, not both\n")
		return base.ErrUsage
	case stdioMode && command[0] == "":
		fmt.Fprintf(a.Stderr, "mrtr probe: -- needs a COMMAND\n")
		return base.ErrUsage
	case !stdioMode && len(pos) != 1:
		fs.Usage()
		return base.ErrUsage
	case stdioMode && (*bearer != "" || *bearerOther != ""):
		fmt.Fprintf(a.Stderr, "mrtr probe: --bearer and --bearer-other are for a URL: stdio has one caller\n")
		return base.ErrUsage
	case !stdioMode && len(env) > 0:
		fmt.Fprintf(a.Stderr, "mrtr probe: --env is for -- COMMAND\n")
		return base.ErrUsage
	}
	if !stdioMode {
		u, err := clientcmd.EndpointURL(pos[0])
		if err != nil {
			fmt.Fprintf(a.Stderr, "mrtr probe: %v\n", err)
			return base.ErrUsage
		}
		pos[0] = u
	}
	if *maxReq < 1 || *rate < 0 || *wait < 0 || *timeout <= 0 {
		fmt.Fprintf(a.Stderr, "mrtr probe: --max-requests must be at least 1, --rate and --wait not negative, --timeout positive\n")
		return base.ErrUsage
	}
	if *other != "" && *tool == "" {
		fmt.Fprintf(a.Stderr, "mrtr probe: --other-tool needs --tool\n")
		return base.ErrUsage
	}
	targs, _, err := clientcmd.ToolArguments("", kvs)
	if err != nil {
		fmt.Fprintf(a.Stderr, "mrtr probe: %v\n", err)
		return base.ErrUsage
	}
	var answers map[string]json.RawMessage
	if *answersFile != "" {
		b, err := os.ReadFile(*answersFile)
		if err != nil {
			return fmt.Errorf("read --answers: %w", err)
		}
		if err := json.Unmarshal(b, &answers); err != nil {
			return fmt.Errorf("--answers %s: want a JSON object of input responses by key: %w", *answersFile, err)
		}
	}
	var target mrtrprobe.Target
	var where string // the report's "url", or its "command": the program, never its arguments
	if stdioMode {
		if _, err := stdio.Environ(nil, env); err != nil {
			fmt.Fprintf(a.Stderr, "mrtr probe: --env: %v\n", err)
			return base.ErrUsage
		}
		st, err := mrtrprobe.StartStdio(stdio.Config{Path: command[0], Args: command[1:], Env: env, Supervisor: supervise.Argv()})
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeStopTimeout)
			defer cancel()
			_ = st.Stop(sctx)
		}()
		target, where = st, base.CommandName(command)
	} else {
		tok, tokOther := *bearer, *bearerOther
		if tok == "" {
			tok = a.Getenv("MRTR_BEARER")
		}
		if tokOther == "" {
			tokOther = a.Getenv("MRTR_BEARER_OTHER")
		}
		for _, t := range []string{tok, tokOther} {
			if strings.ContainsFunc(t, func(r rune) bool { return r < ' ' || r == 0x7f }) {
				return errors.New("a bearer token has control characters an HTTP header cannot carry")
			}
		}
		target, where = &mrtrprobe.HTTPTarget{URL: pos[0], Bearer: tok, BearerOther: tokOther}, pos[0]
	}
	rep, err := mrtrprobe.Run(ctx, target, &mrtrprobe.Options{
		Tool: *tool, OtherTool: *other, Args: targs, Answers: answers,
		MaxRequests: *maxReq, Rate: *rate, Wait: *wait, Timeout: *timeout,
	})
	if err != nil {
		return clientcmd.CleanError(err)
	}
	if *asJSON {
		out := struct {
			URL     string `json:"url,omitempty"`
			Command string `json:"command,omitempty"`
			*mrtrprobe.Report
		}{Report: rep}
		if stdioMode {
			out.Command = where
		} else {
			out.URL = where
		}
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(a.Stdout, "%s\n", termtext.JSON(b)); err != nil {
			return err
		}
	} else {
		if stdioMode {
			where = "-- " + where
		}
		printProbe(a, where, rep)
	}
	switch {
	case rep.Failed():
		return errProbeFailed
	case rep.Unchecked != "":
		return errProbeUnchecked
	case len(rep.Incomplete) > 0:
		return errProbeIncomplete
	}
	return nil
}

// probeStopTimeout bounds stopping a probed command: past it, what is
// left of the grace periods is skipped (SIGKILL).
const probeStopTimeout = 10 * time.Second

// The exit statuses of a probe that ran, besides 0; --help lists them.
const (
	exitProbeFailed     = 1 // a check failed
	exitProbeUnchecked  = 3 // nothing could be checked
	exitProbeIncomplete = 4 // an essential check was skipped or inconclusive
)

// probeStatus is the outcome of a probe that ran and reported, as an
// error whose exit status is the value; the report has said why.
type probeStatus int

func (s probeStatus) Error() string {
	switch s {
	case exitProbeFailed:
		return "a check failed"
	case exitProbeUnchecked:
		return "nothing could be checked"
	default:
		return "incomplete: an essential check did not run"
	}
}

var (
	errProbeFailed     error = probeStatus(exitProbeFailed)
	errProbeUnchecked  error = probeStatus(exitProbeUnchecked)
	errProbeIncomplete error = probeStatus(exitProbeIncomplete)
)

// ExitStatus is the probe's exit status (base.ExitStatus): the report
// already printed says why.
func (s probeStatus) ExitStatus() int { return int(s) }

// printProbe writes rep as a table: check, verdict, what it sent and saw,
// and why it matters. What the server chose (names, messages, texts, in
// the details) is written on one line without terminal controls
// (termtext.Line): a server cannot clear the screen and print its own
// table.
func printProbe(a *base.App, target string, rep *mrtrprobe.Report) {
	fmt.Fprintf(a.Stdout, "mrtr probe %s\n", termtext.Line(target))
	fmt.Fprintf(a.Stdout, "era %s", termtext.Line(rep.Era))
	if rep.Tool != "" {
		fmt.Fprintf(a.Stdout, ", tool %s", termtext.Line(rep.Tool))
	}
	if len(rep.Others) > 0 {
		others := make([]string, len(rep.Others))
		for i, o := range rep.Others {
			others[i] = termtext.Line(o)
		}
		fmt.Fprintf(a.Stdout, " (moved: %s)", strings.Join(others, ", "))
	}
	fmt.Fprintf(a.Stdout, ", %s", base.Plural(rep.Requests, "request"))
	if rep.Cleanup > 0 {
		fmt.Fprintf(a.Stdout, ", %d more to end the paused flows", rep.Cleanup)
	}
	fmt.Fprint(a.Stdout, "\n\n")
	if rep.Unchecked != "" {
		fmt.Fprintf(a.Stdout, "nothing checked: %s\n", termtext.Line(rep.Unchecked))
		return
	}
	tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tVERDICT\tSENT AND SAW")
	for _, c := range rep.Checks {
		v := string(c.Verdict)
		if c.Verdict == mrtrprobe.Fail {
			v = "FAIL"
		}
		lines := strings.Split(termtext.Line(c.Detail), "; ")
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, v, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(tw, "\t\t%s\n", l)
		}
		if c.Verdict != mrtrprobe.Skip {
			fmt.Fprintf(tw, "\t\twhy: %s\n", mrtrprobe.Why(c.Name))
		}
	}
	tw.Flush()
	if len(rep.Incomplete) > 0 {
		fmt.Fprintf(a.Stdout, "\nincomplete: %s could not run or was inconclusive (see above); exit status %d\n",
			strings.Join(rep.Incomplete, ", "), exitProbeIncomplete)
	}
}
