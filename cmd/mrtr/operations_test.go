package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
)

// operationsPath is docs/OPERATIONS.md, from this package's directory.
const operationsPath = "../../docs/OPERATIONS.md"

// TestOperationsCurlRecipe (issue 39, item 5): the curl recipe of
// docs/OPERATIONS.md, run as written against a started `mrtr serve`
// (only its MCP= line pointed at it), pauses the deploy tool, completes
// the resume, and gets the replayed and the tampered state refused.
func TestOperationsCurlRecipe(t *testing.T) {
	for _, tool := range []string{"sh", "curl", "jq", "sed", "awk"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the recipe needs %s: %v", tool, err)
		}
	}
	data, err := os.ReadFile(operationsPath)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- curl-recipe -->\n```sh\n(.*?)```\n<!-- /curl-recipe -->").FindStringSubmatch(string(data))
	if m == nil {
		t.Fatal("docs/OPERATIONS.md has no <!-- curl-recipe --> block")
	}
	const docURL = "MCP=http://127.0.0.1:8080/mcp\n"
	if !strings.HasPrefix(m[1], docURL) {
		t.Fatalf("the recipe does not begin with %q:\n%s", docURL, m[1])
	}

	logs := new(testcmd.Buffer)
	a := &base.App{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: logs, Getenv: func(string) string { return "" }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- run(ctx, a, []string{"serve", "--addr", "127.0.0.1:0", "--log-format", "json"}) }()
	t.Cleanup(func() { cancel(); <-done })
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == ""; url = testcmd.ServingURL(logs.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}

	script := "MCP=" + url + "\n" + strings.TrimPrefix(m[1], docURL)
	cmd := exec.CommandContext(t.Context(), "sh", "-c", script)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the recipe: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	out := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	want := []string{`"text":"deployed api to production"`, `"reason":"replayed"`, `"reason":"invalid"`}
	if len(out) != len(want) {
		t.Fatalf("the recipe printed %d lines, want %d (resumed, replayed, tampered):\n%s%s", len(out), len(want), stdout.String(), stderr.String())
	}
	for i, w := range want {
		if !strings.Contains(out[i], w) {
			t.Errorf("the recipe's answer %d: %s, want %s", i+1, out[i], w)
		}
	}
	for _, w := range want[1:] {
		if !strings.Contains(m[1], strings.Trim(w, `"`)) {
			t.Errorf("the recipe's comments do not say %s", w)
		}
	}
}
