package main

import (
	"regexp"
	"runtime/debug"
	"strings"
)

// devVersion is the version of a build from no release: 0.0.0-dev, then
// +REV (the commit's first 12 hex digits, as in a Go pseudo-version) when
// the build knows its commit (a modified tree shows as vcs.modified in mrtr
// version). scripts/image.sh and .goreleaser.yaml's snapshots write the same
// (e2e/ship_release_test.go checks the three).
const devVersion = "0.0.0-dev"

// resolveVersion is the version mrtr reports, one scheme for every way it
// is built: the one a release build stamped (-X main.version=X.Y.Z, by
// goreleaser and make image); else the module version `go install
// ...@vX.Y.Z` recorded, without its v; else devVersion with the commit the
// build came from, when it knows one.
func resolveVersion(stamped string, read func() (*debug.BuildInfo, bool)) string {
	if stamped != "" {
		return stamped
	}
	if read == nil {
		read = debug.ReadBuildInfo
	}
	bi, ok := read()
	if !ok {
		return devVersion
	}
	// A Go pseudo-version (v0.0.0-20261202070000-abcdef123456), which go
	// build records for a commit no tag names, is no release.
	pseudo := regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+-(0\.|[0-9A-Za-z.]+\.0\.)?[0-9]{14}-[0-9a-f]{12}(\+dirty)?$`)
	if v := bi.Main.Version; v != "" && v != "(devel)" && !pseudo.MatchString(v) {
		return strings.TrimPrefix(v, "v")
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return devVersion + "+" + s.Value[:12]
		}
	}
	return devVersion
}
