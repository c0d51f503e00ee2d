package main

import (
	"bytes"
	"context"
	"io"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
)

func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		var out bytes.Buffer
		a := &base.App{Stdout: &out, Stderr: io.Discard, Getenv: func(string) string { return "" },
			BuildInfo: func() (*debug.BuildInfo, bool) {
				return &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/mrtr-go/mrtr", Version: "v0.2.0"},
					Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-11-30T19:00:00Z"},
						{Key: "vcs.modified", Value: "true"}, {Key: "-ldflags", Value: "-s"}}}, true
			}}
		if code := run(context.Background(), a, []string{arg}); code != 0 {
			t.Fatalf("%s: exit %d", arg, code)
		}
		want := "mrtr 0.2.0\nmodule github.com/mrtr-go/mrtr v0.2.0\ngo go1.26.0\nvcs.revision abc123\nvcs.time 2026-11-30T19:00:00Z\nvcs.modified true\n"
		if out.String() != want {
			t.Fatalf("%s:\n%s\nwant\n%s", arg, out.String(), want)
		}
	}
	// The real build info of the test binary is readable too.
	code, out, _ := runApp(t, "version")
	if code != 0 || !strings.HasPrefix(out, "mrtr "+resolveVersion(version, nil)+"\n") || !strings.Contains(out, "\ngo go1.") {
		t.Fatalf("version: %d %q", code, out)
	}
}
