package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/call"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
)

// taskIDLine matches the line that names a task's id.
var taskIDLine = regexp.MustCompile(`(?m)^task \S+: `)

// TestDocsTaskCall runs each `mrtr call` session the README and
// docs/OPERATIONS.md show in a <!-- task-call --> block against `mrtr
// serve`, typing the answers the session shows, and wants the terminal to
// read as the block does (stdout and stderr together; the task's id is
// random).
func TestDocsTaskCall(t *testing.T) {
	url, _ := startServe(t)
	block := regexp.MustCompile("(?s)<!-- task-call -->\n```console\n(.*?)```\n<!-- /task-call -->")
	answer := regexp.MustCompile(`^([a-z_]+)(?: \[[^\]]*\])?: (.*)$`)
	for _, path := range []string{readmePath, operationsPath} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		blocks := block.FindAllStringSubmatch(string(data), -1)
		if len(blocks) == 0 {
			t.Errorf("%s has no <!-- task-call --> block", path)
		}
		for _, b := range blocks {
			command, want, _ := strings.Cut(b[1], "\n")
			words := strings.Fields(strings.TrimPrefix(command, "$ "))
			if len(words) < 4 || words[0] != "mrtr" || words[1] != "call" || !strings.HasSuffix(words[2], "/mcp") {
				t.Errorf("%s: %q is not a mrtr call of a tool", path, command)
				continue
			}
			var stdin strings.Builder
			for line := range strings.Lines(want) {
				if m := answer.FindStringSubmatch(strings.TrimSuffix(line, "\n")); m != nil && m[1] != "task" {
					stdin.WriteString(m[2] + "\n")
				}
			}
			var term testcmd.Buffer
			a := &base.App{Stdin: strings.NewReader(stdin.String()), Stdout: &term, Stderr: &term, Getenv: func(string) string { return "" }}
			if err := call.Cmd.Run(t.Context(), a, append([]string{url}, words[3:]...)); err != nil {
				t.Errorf("%s: %s: %v\n%s", path, command, err, term.String())
				continue
			}
			norm := func(s string) string { return taskIDLine.ReplaceAllString(s, "task ID: ") }
			if got := norm(term.String()); got != norm(want) {
				t.Errorf("%s: %s printed\n%s\nthe block shows\n%s", path, command, got, norm(want))
			}
		}
	}
}
