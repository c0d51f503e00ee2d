package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr/audit"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/internal/testing/testredis"
)

// readTrail reads the lines of an audit trail.
func readTrail(t *testing.T, path string) []*audit.Line {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*audit.Line
	for _, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		l, err := audit.ParseLine(line)
		if err != nil {
			t.Fatalf("%s: %v: %s", path, err, line)
		}
		out = append(out, l)
	}
	return out
}

// events lists the events of a trail's call lines: the checkpoint,
// restart and certs lines that seal it are left out (sealing reads them).
func events(ls []*audit.Line) string {
	var e []string
	for _, l := range ls {
		if l.Event == audit.EventCheckpoint || l.Event == audit.EventRestart || l.Event == audit.EventCerts {
			continue
		}
		s := l.Event
		if l.Reason != "" {
			s += ":" + l.Reason
		}
		e = append(e, s)
	}
	return strings.Join(e, ",")
}

// runVerify runs mrtr audit verify and returns its exit code and output.
func runVerify(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	a := &base.App{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}
	code := run(t.Context(), a, append([]string{"audit", "verify"}, args...))
	return code, out.String()
}

// TestProxyAudit pins issue 29 item 1 on `mrtr proxy`: a pause, its
// resume, the completion and a replayed resume each write their line,
// through a command upstream of either era (the bridge pauses the legacy
// one's mid-call elicitation) and through an HTTP upstream (mrtr serve);
// the lines name the upstream, the client and the answers' actions, and
// never the argument value, the answer's content or the token. mrtr
// audit verify accepts the trail and names a line that was changed.
func TestProxyAudit(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys.json")
	testcmd.WriteRing(t, keys, testcmd.GenKey(t, "k1"))
	upstream, _ := startServe(t, "--keys", keys)
	for _, tc := range []struct {
		name, tool, upstream string
		args                 []string
	}{
		{"modern", "delete", "command ", []string{"--upstream-env", testcmd.StdioServerEnv + "=modern", "--", os.Args[0]}},
		{"legacy", "delete", "command ", []string{"--upstream-env", testcmd.StdioServerEnv + "=legacy", "--", os.Args[0]}},
		{"http", "deploy", "http://127.0.0.1", []string{"--upstream", upstream}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trail := filepath.Join(t.TempDir(), "audit.jsonl")
			url, _ := startProxyCmd(t, append([]string{"--keys", keys, "--audit", trail}, tc.args...)...)
			const secretArg = "zq-secret-argument"
			const secretAnswer = "zq-secret-answer"
			args := map[string]any{"item": secretArg}
			if tc.tool == "deploy" {
				args = map[string]any{"service": secretArg, "env": "staging"}
			}
			meta := map[string]any{"io.modelcontextprotocol/clientInfo": map[string]any{"name": "audit-test", "version": "9"}}
			tok, answers := pauseCall(t, url, tc.tool, args, meta, map[string]any{"ok": true, "approve": true, "note": secretAnswer})
			if _, e := rpcPostMeta(t, url, "tools/call", map[string]any{"name": tc.tool, "arguments": args, "requestState": tok, "inputResponses": answers}, meta); e != nil {
				t.Fatalf("resume: %v", e)
			}
			if _, e := rpcPostMeta(t, url, "tools/call", map[string]any{"name": tc.tool, "arguments": args, "requestState": tok, "inputResponses": answers}, meta); e == nil {
				t.Fatal("replay accepted")
			}
			ls := readTrail(t, trail)[1:] // after the first checkpoint
			if got := events(ls); got != "paused,resumed,completed,rejected:replayed" {
				t.Fatalf("events %s", got)
			}
			for _, l := range ls {
				if !strings.HasPrefix(l.Upstream, tc.upstream) || l.Client == nil || l.Client.Name != "audit-test" || l.Target != tc.tool ||
					!l.Principal.Anonymous || l.Flow != ls[0].Flow || l.ArgsDigest != ls[0].ArgsDigest || l.RequestID != "1" {
					t.Fatalf("line %+v", l)
				}
			}
			if len(ls[0].Inputs) != 1 || ls[0].Inputs[0].Method != "elicitation/create" || len(ls[1].Answers) != 1 || ls[1].Answers[0].Action != "accept" ||
				ls[2].Outcome != "complete" {
				t.Fatalf("paused %+v, resumed %+v, completed %+v", ls[0], ls[1], ls[2])
			}
			b, _ := os.ReadFile(trail)
			for _, s := range []string{secretArg, secretAnswer, tok, tok[len(tok)-16:]} {
				if bytes.Contains(b, []byte(s)) {
					t.Fatalf("the trail holds %q", s)
				}
			}
			if code, out := runVerify(t, "--keys", keys, trail); code != 0 || !strings.Contains(out, "5 lines") { // the first checkpoint and 4
				t.Fatalf("verify: %d %s", code, out)
			}
			changed := filepath.Join(t.TempDir(), "changed.jsonl")
			os.WriteFile(changed, bytes.Replace(b, []byte(`"action":"accept"`), []byte(`"action":"decline"`), 1), 0o600)
			if code, out := runVerify(t, "--keys", keys, changed); code != 1 || !strings.Contains(out, "line 3: altered") {
				t.Fatalf("verify of a changed trail: %d %s", code, out)
			}
		})
	}
}

// pauseCall makes a first call of tool that must pause, and returns its
// requestState and an accepted answer with content to each of its input
// requests.
func pauseCall(t *testing.T, url, tool string, args, meta, content map[string]any) (string, map[string]any) {
	t.Helper()
	res, e := rpcPostMeta(t, url, "tools/call", map[string]any{"name": tool, "arguments": args}, meta)
	var tok string
	json.Unmarshal(res["requestState"], &tok)
	var irs map[string]json.RawMessage
	json.Unmarshal(res["inputRequests"], &irs)
	if e != nil || tok == "" || len(irs) != 1 {
		t.Fatalf("first call: %v %v", res, e)
	}
	answers := map[string]any{}
	for k := range irs {
		answers[k] = map[string]any{"action": "accept", "content": content}
	}
	return tok, answers
}

// rpcPostMeta is rpcPost with more _meta.
func rpcPostMeta(t *testing.T, url, method string, params, meta map[string]any) (map[string]json.RawMessage, map[string]json.RawMessage) {
	t.Helper()
	if meta != nil {
		params["_meta"] = meta
	}
	return testcmd.RPCPost(t, url, method, params)
}

// TestAuditRequiredFailsClosed pins issue 29 item 4: with the trail on a
// file whose writes fail (/dev/full), --audit-required refuses the call
// with -32603; without it the call goes on and the failure is counted in
// mrtr_audit_errors_total.
func TestAuditRequiredFailsClosed(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	url, _ := startServe(t, "--audit", "/dev/full", "--audit-required")
	res, e := (mcpClient{t, url}).deploy("")
	if e == nil || e["code"] != float64(-32603) {
		t.Fatalf("with --audit-required: %v %v", res, e)
	}
	// The proxy: a pause is not sealed, and an answer is not sent.
	purl, _ := startProxyCmd(t, "--audit", "/dev/full", "--audit-required", "--upstream-env", testcmd.StdioServerEnv+"=modern", "--", os.Args[0])
	for _, tool := range []string{"delete", "env"} {
		if res, e := testcmd.RPCPost(t, purl, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{"item": "a"}}); e == nil || string(e["code"]) != "-32603" {
			t.Fatalf("proxy %s with --audit-required: %v %v", tool, res, e)
		}
	}
	url, logs := startServe(t, "--audit", "/dev/full", "--metrics-addr", "127.0.0.1:0")
	(mcpClient{t, url}).pause()
	if !strings.Contains(logs.String(), "audit: a line of the trail was not written") {
		t.Fatalf("no log line for the failed write: %s", logs.String())
	}
	_, body := testcmd.GetHealth(t, testcmd.LogURL(t, logs, "mrtr metrics serving"))
	// The pause's line, and the checkpoints (the start's) not written.
	if !regexp.MustCompile(`\nmrtr_audit_errors_total [1-9][0-9]*\n`).MatchString(body) {
		t.Fatalf("/metrics: %s", body)
	}
}

// TestAuditVerifyUsage: verify needs --keys and a path; other audit
// verbs are usage errors. (--audit-required without --audit:
// TestAuditRequiredNeedsAudit, bounded.)
func TestAuditVerifyUsage(t *testing.T) {
	if code, _ := runVerify(t); code != 2 {
		t.Fatalf("no args: exit %d", code)
	}
	a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	if code := run(t.Context(), a, []string{"audit", "show"}); code != 2 {
		t.Fatalf("audit show: exit %d", code)
	}
	var stderr testcmd.Buffer
	a = &base.App{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }}
	if code := run(t.Context(), a, []string{"serve", "--stdio", "--audit", "-"}); code == 0 || !strings.Contains(stderr.String(), "MCP channel") {
		t.Fatalf("serve --stdio --audit -: exit %d: %s", code, stderr.String())
	}
}

// TestProxyReplicasAudit: with replicas on (a bridged upstream and a
// Redis store), every resume is first checked by the replicas' own guard
// to find the replica holding its call; that check writes no line of
// its own (only the guard that serves the call does), so the trail holds
// one line per fact.
func TestProxyReplicasAudit(t *testing.T) {
	rurl := testredis.Start(t)
	trail := filepath.Join(t.TempDir(), "audit.jsonl")
	url, _ := startProxyCmd(t, "--audit", trail, "--replay", rurl, "--upstream-env", testcmd.StdioServerEnv+"=legacy", "--", os.Args[0])
	args := map[string]any{"item": "a"}
	tok, answers := pauseCall(t, url, "delete", args, nil, map[string]any{"ok": true})
	if _, e := testcmd.RPCPost(t, url, "tools/call", map[string]any{"name": "delete", "arguments": args, "requestState": tok, "inputResponses": answers}); e != nil {
		t.Fatalf("resume: %v", e)
	}
	testcmd.RPCPost(t, url, "tools/call", map[string]any{"name": "delete", "arguments": args, "requestState": tok + "x", "inputResponses": answers})
	if got := events(readTrail(t, trail)); got != "paused,resumed,completed,rejected:invalid" {
		t.Fatalf("events %s", got)
	}
}
