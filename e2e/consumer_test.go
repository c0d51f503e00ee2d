package e2e

import (
	"archive/zip"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// devVersion is the version our modules require each other at between
// releases (docs/RELEASING.md); the consumer check serves the working tree
// under it.
const devVersion = "v0.0.0-00010101000000-000000000000"

// consumerCase is one throwaway consumer module: the packages it imports
// with `go get`, and the modules its go.sum then names, pinned precisely.
//
// What a consumer needs is the modules that provide a package it builds:
// `go get` and `go build` record exactly those (Go's lazy module loading
// reads the go.mod of no other module), so mods is that list. Every
// module the library module's go.mod lists is still in the consumer's
// module graph (`go list -m all`, what `go mod download` fetches): banned
// is what must not be there, so the library's go.mod does not list it.
type consumerCase struct {
	name    string
	imports []string // the packages its main imports
	mods    []string // the modules its go.sum names after go get and go build
	banned  []string // module path prefixes its module graph may not hold
}

// rootBanned are the command's, the e2e tests' and the telemetry's
// dependencies: not in the module graph of a consumer of the library.
var rootBanned = []string{
	"github.com/creack/pty", "github.com/prometheus/", "go.opentelemetry.io/", "google.golang.org/grpc",
	"google.golang.org/protobuf", "github.com/santhosh-tekuri/", "github.com/mark3labs/",
	"github.com/mrtr-go/mrtr/", // another of our modules
}

// mcpgoBanned: mcpgo's consumers get mcp-go's graph, but not the
// command's or the telemetry's dependencies.
var mcpgoBanned = []string{
	"github.com/creack/pty", "github.com/prometheus/", "go.opentelemetry.io/",
	"github.com/mrtr-go/mrtr/cmd", "github.com/mrtr-go/mrtr/internal/", "github.com/mrtr-go/mrtr/e2e",
}

// segmentio is what the guard's JSON decoding builds on.
var segmentio = []string{"github.com/segmentio/asm", "github.com/segmentio/encoding", "golang.org/x/sys"}

var consumerCases = []consumerCase{
	{name: "reqstate", imports: []string{"github.com/mrtr-go/mrtr/reqstate"},
		mods: []string{"github.com/mrtr-go/mrtr"}, banned: rootBanned},
	{name: "replay", imports: []string{"github.com/mrtr-go/mrtr/replay"},
		mods: []string{"github.com/mrtr-go/mrtr"}, banned: rootBanned},
	{name: "guard", imports: []string{"github.com/mrtr-go/mrtr"},
		mods: append([]string{"github.com/mrtr-go/mrtr"}, segmentio...), banned: rootBanned},
	{name: "redisstore", imports: []string{"github.com/mrtr-go/mrtr/replay/redisstore"},
		mods:   []string{"github.com/cespare/xxhash/v2", "github.com/mrtr-go/mrtr", "github.com/redis/go-redis/v9", "go.uber.org/atomic", "golang.org/x/sys"},
		banned: rootBanned},
	{name: "bearer", imports: []string{"github.com/mrtr-go/mrtr/bearer"},
		mods: []string{"github.com/golang-jwt/jwt/v5", "github.com/mrtr-go/mrtr"}, banned: rootBanned},
	{name: "gosdk", imports: []string{"github.com/mrtr-go/mrtr/gosdk"},
		mods: append([]string{"github.com/golang-jwt/jwt/v5", "github.com/google/jsonschema-go", "github.com/modelcontextprotocol/go-sdk",
			"github.com/mrtr-go/mrtr", "github.com/yosida95/uritemplate/v3", "golang.org/x/oauth2", "golang.org/x/sync", "golang.org/x/time"}, segmentio...),
		banned: rootBanned},
	{name: "proxy", imports: []string{"github.com/mrtr-go/mrtr/proxy"},
		mods: append([]string{"github.com/mrtr-go/mrtr"}, segmentio...), banned: rootBanned},
	{name: "audit", imports: []string{"github.com/mrtr-go/mrtr/audit"},
		mods: append([]string{"github.com/mrtr-go/mrtr"}, segmentio...), banned: rootBanned},
	{name: "mcpgo", imports: []string{"github.com/mrtr-go/mrtr/mcpgo"},
		mods: append([]string{"github.com/google/jsonschema-go", "github.com/google/uuid", "github.com/mark3labs/mcp-go", "github.com/mrtr-go/mrtr",
			"github.com/mrtr-go/mrtr/mcpgo", "github.com/santhosh-tekuri/jsonschema/v6", "github.com/spf13/cast", "github.com/yosida95/uritemplate/v3",
			"golang.org/x/text"}, segmentio...),
		banned: mcpgoBanned},
}

// TestConsumerModules builds a throwaway consumer module outside the tree
// against each library module, as a user would after `go get`: our
// modules come from a file-based module proxy built from the working tree
// (at the version they require each other at), everything else from the
// module cache, offline, with no go.work and no replace directive. Each
// consumer must build, and its go.sum must name exactly the modules the
// case pins, and its module graph none of the command's, the telemetry's
// or the e2e tests' dependencies.
func TestConsumerModules(t *testing.T) {
	if testing.Short() {
		t.Skip("builds consumer modules")
	}
	goEnv := func(key string) string {
		out, err := exec.Command("go", "env", key).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", key, err)
		}
		return strings.TrimSpace(string(out))
	}
	cache := goEnv("GOMODCACHE")
	proxyDir := t.TempDir()
	for _, m := range []struct{ path, dir string }{
		{"github.com/mrtr-go/mrtr", repoRoot},
		{"github.com/mrtr-go/mrtr/mcpgo", filepath.Join(repoRoot, "mcpgo")},
	} {
		serveModule(t, proxyDir, m.path, m.dir, devVersion)
	}
	env := append(os.Environ(),
		"GOWORK=off",
		"GOFLAGS=-mod=mod -modcacherw",
		"GOPROXY=file://"+filepath.ToSlash(proxyDir)+",file://"+filepath.ToSlash(filepath.Join(cache, "cache", "download")),
		"GOSUMDB=off", "GONOSUMDB=", "GOPRIVATE=", "GONOPROXY=",
		"GOTOOLCHAIN=local",
		// A module cache of its own: our modules at devVersion must not
		// land in the user's, where a later run would find them stale.
		"GOMODCACHE="+t.TempDir(),
	)
	for _, c := range consumerCases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var src strings.Builder
			src.WriteString("package main\n\nimport (\n")
			for _, p := range c.imports {
				src.WriteString("\t_ \"" + p + "\"\n")
			}
			src.WriteString(")\n\nfunc main() {}\n")
			putFile(t, filepath.Join(dir, "main.go"), src.String(), 0o644)
			putFile(t, filepath.Join(dir, "go.mod"), "module example.com/consumer\n\ngo 1.26.0\n", 0o644)
			get := []string{"get"}
			for _, p := range c.imports {
				get = append(get, p+"@"+devVersion)
			}
			run := func(args ...string) {
				t.Helper()
				cmd := exec.Command("go", args...)
				cmd.Dir, cmd.Env = dir, env
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
				}
			}
			run(get...)
			run("build", "-o", os.DevNull, ".")
			mods := readGoSum(t, filepath.Join(dir, "go.sum"))
			if want := slices.Sorted(slices.Values(c.mods)); !slices.Equal(mods, want) {
				t.Errorf("after go get and go build, go.sum names\n\t%s\nwant\n\t%s", strings.Join(mods, "\n\t"), strings.Join(want, "\n\t"))
			}
			// The module graph holds every module the library module's
			// go.mod lists, whether or not go.sum names it: go list -m all
			// and go mod download fetch them all. (-e: the module cache need not
			// hold the .info of a module nobody builds.)
			cmd := exec.Command("go", "list", "-m", "-e", "-f", "{{.Path}}", "all")
			cmd.Dir, cmd.Env = dir, env
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -m all: %v\n%s", err, stderr.String())
			}
			for _, m := range strings.Fields(string(out)) {
				for _, banned := range c.banned {
					if strings.HasPrefix(m, banned) {
						t.Errorf("the consumer's module graph holds %s", m)
					}
				}
			}
		})
	}
}

// readGoSum returns the modules a go.sum names (by their source or their
// go.mod), sorted.
func readGoSum(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var mods []string
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) != 3 {
			t.Fatalf("go.sum line %q", line)
		}
		mods = append(mods, fields[0])
	}
	slices.Sort(mods)
	return slices.Compact(mods)
}

// serveModule puts the module in dir, as it is in the working tree, into
// the file-based module proxy at proxyDir as path@version: what `go mod
// download` would fetch once it is tagged. The zip leaves out what a
// module zip does: nested modules, VCS and hidden directories, and the
// Node tooling's node_modules.
func serveModule(t *testing.T, proxyDir, path, dir, version string) {
	t.Helper()
	at := filepath.Join(proxyDir, filepath.FromSlash(path), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := json.Marshal(map[string]string{"Version": version, "Time": "2026-01-01T00:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"list": []byte(version + "\n"), version + ".info": info, version + ".mod": mod} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	zw := zip.NewWriter(out)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" {
				return fs.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return fs.SkipDir // a nested module
			}
			return nil
		}
		if !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		w, err := zw.Create(path + "@" + version + "/" + filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
}
