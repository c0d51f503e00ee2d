package main

import (
	"runtime/debug"
	"testing"
)

// TestResolveVersion: one scheme for every build. A stamped version
// (goreleaser, make image) wins; go install ...@vX.Y.Z gives X.Y.Z; a
// pseudo-version, (devel) or no build info is 0.0.0-dev, with the commit's
// first 12 hex digits when the build knows it.
func TestResolveVersion(t *testing.T) {
	rev := "05a473b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7"
	info := func(v string, settings ...debug.BuildSetting) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{Main: debug.Module{Path: "github.com/mrtr-go/mrtr/cmd/mrtr", Version: v}, Settings: settings}, true
		}
	}
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}
	for _, c := range []struct {
		name, stamped string
		read          func() (*debug.BuildInfo, bool)
		want          string
	}{
		{"stamped", "1.2.3", info("v9.9.9"), "1.2.3"},
		{"stamped snapshot", "0.0.0-dev+05a473b1c2d3", info("(devel)"), "0.0.0-dev+05a473b1c2d3"},
		{"go install at a tag", "", info("v1.2.3"), "1.2.3"},
		{"go install of a prerelease", "", info("v1.3.0-rc.1"), "1.3.0-rc.1"},
		{"pseudo-version", "", info("v0.0.0-20261202070000-05a473b1c2d3", vcs...), "0.0.0-dev+05a473b1c2d3"},
		{"pseudo-version after a tag", "", info("v1.2.4-0.20261202070000-05a473b1c2d3+dirty",
			debug.BuildSetting{Key: "vcs.revision", Value: rev}, debug.BuildSetting{Key: "vcs.modified", Value: "true"}), "0.0.0-dev+05a473b1c2d3"},
		{"devel with vcs", "", info("(devel)", vcs...), "0.0.0-dev+05a473b1c2d3"},
		{"devel without vcs (a go.work build)", "", info("(devel)"), "0.0.0-dev"},
		{"no build info", "", func() (*debug.BuildInfo, bool) { return nil, false }, "0.0.0-dev"},
	} {
		if got := resolveVersion(c.stamped, c.read); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
