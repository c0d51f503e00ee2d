package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSetupChecksInstallNothing: what the tests run to learn whether the
// harness, the everything-server, the Inspector and the shipping tools are
// there (setupCheck, each setup script's --check) installs nothing, with
// MRTR_REQUIRE_CONFORMANCE / MRTR_REQUIRE_INSPECTOR / MRTR_REQUIRE_SHIP
// set or not: npm, apt-get, sudo and `go install` on PATH record any call
// and none may happen. A missing or stale install skips, or fails under the
// requirement, saying to run `make deps`; an installed and current one
// passes.
func TestSetupChecksInstallNothing(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	// A copy of the repository's scripts and pins in a tree of its own.
	root := t.TempDir()
	for _, f := range []string{"scripts/conformance-setup.sh", "scripts/everything-setup.sh", "scripts/inspector-setup.sh", "scripts/ship-setup.sh",
		"conformance/package.json", "conformance/package-lock.json", "inspector/package.json", "inspector/package-lock.json", "go.mod"} {
		data, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		putFile(t, filepath.Join(root, f), string(data), 0o755)
	}
	// Installers that record being called.
	bin, calls := t.TempDir(), filepath.Join(t.TempDir(), "calls")
	for _, name := range []string{"npm", "npx", "apt-get", "sudo"} {
		putFile(t, filepath.Join(bin, name), "#!/bin/sh\necho "+name+" \"$@\" >>"+calls+"\nexit 1\n", 0o755)
	}
	putFile(t, filepath.Join(bin, "go"), "#!/bin/sh\n[ \"$1\" = install ] && { echo go \"$@\" >>"+calls+"; exit 1; }\nexec "+goBin+" \"$@\"\n", 0o755)
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	noInstall := func(t *testing.T) {
		t.Helper()
		if data, err := os.ReadFile(calls); err == nil {
			t.Fatalf("a check installed: %s", data)
		}
	}
	verdict := func(t *testing.T, script, env, required string) (skip, fail string) {
		t.Helper()
		t.Setenv(env, required)
		c := &setupCheck{root: root, script: script, requireEnv: env}
		skip, fail = c.verdict()
		noInstall(t)
		return skip, fail
	}
	missing := func(t *testing.T, script, env, why string) {
		t.Helper()
		skip, fail := verdict(t, script, env, "")
		if fail != "" || !strings.Contains(skip, why) || !strings.Contains(skip, "make deps") || !strings.Contains(skip, env+"=1") {
			t.Fatalf("without %s: skip %q, fail %q; want a skip saying %q and to run make deps", env, skip, fail, why)
		}
		skip, fail = verdict(t, script, env, "1")
		if skip != "" || !strings.Contains(fail, env+"=1") || !strings.Contains(fail, why) || !strings.Contains(fail, "make deps") {
			t.Fatalf("with %s=1: skip %q, fail %q; want a failure saying %q and to run make deps", env, skip, fail, why)
		}
	}

	t.Run("harness", func(t *testing.T) {
		modules := filepath.Join(root, "conformance", "node_modules")
		missing(t, "conformance-setup.sh", requireEnv, "node_modules is missing")
		putFile(t, filepath.Join(modules, ".bin", "node"), "#!/bin/sh\n", 0o755)
		putFile(t, filepath.Join(modules, ".bin", "conformance"), "#!/bin/sh\n", 0o755)
		missing(t, "conformance-setup.sh", requireEnv, ".mrtr-setup-stamp is missing")
		putFile(t, filepath.Join(modules, ".mrtr-setup-stamp"), pinHash(t, filepath.Join(root, "conformance"))+"\n", 0o644)
		if skip, fail := verdict(t, "conformance-setup.sh", requireEnv, "1"); skip != "" || fail != "" {
			t.Fatalf("installed and current: skip %q, fail %q", skip, fail)
		}
		// The pin moves: the install is stale.
		f, err := os.OpenFile(filepath.Join(root, "conformance", "package-lock.json"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("\n")
		f.Close()
		missing(t, "conformance-setup.sh", requireEnv, "changed since the last install")
	})
	t.Run("everything-server", func(t *testing.T) {
		missing(t, "everything-setup.sh", requireEnv, "everything-server is missing")
		missing(t, "everything-setup.sh", requireEnv, "everything-server-v1.4.1 is missing")
		// Some other binary in its place.
		putFile(t, filepath.Join(root, "conformance", "bin", "everything-server"), "#!/bin/sh\n", 0o755)
		missing(t, "everything-setup.sh", requireEnv, "is not a Go binary")
	})
	t.Run("shipping tools", func(t *testing.T) {
		t.Setenv("MRTR_TOOLS", t.TempDir()) // no helm, no goreleaser built yet
		missing(t, "ship-setup.sh", shipRequireEnv, "helm-v3.22.0 is missing")
		// Some other binary in helm's place.
		putFile(t, filepath.Join(os.Getenv("MRTR_TOOLS"), "helm-v3.22.0"), "#!/bin/sh\n", 0o755)
		missing(t, "ship-setup.sh", shipRequireEnv, "helm-v3.22.0 is not a Go binary")
	})
	t.Run("inspector", func(t *testing.T) {
		why := "node_modules is missing"
		if _, err := os.Stat("/usr/bin/chromium"); err != nil {
			why = "/usr/bin/chromium is missing"
		}
		missing(t, "inspector-setup.sh", inspectorRequireEnv, why)
	})
}

// pinHash is the stamp a setup script writes: sha256 of package.json then
// package-lock.json in dir.
func pinHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	for _, f := range []string{"package.json", "package-lock.json"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func putFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}
