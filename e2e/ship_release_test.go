package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestGoreleaser: `goreleaser check` accepts .goreleaser.yaml, and a
// snapshot build of it for this machine's target (the same builds section,
// only the dist directory moved to a temporary one) gives a mrtr whose
// `mrtr version` prints the version goreleaser stamped.
func TestGoreleaser(t *testing.T) {
	goreleaser := toolPath(t, "goreleaser")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goreleaser, args...)
		cmd.Dir = repoRoot
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("goreleaser %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("check")

	cfg, err := os.ReadFile(filepath.Join(repoRoot, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"goos: [linux, darwin, windows]", "goarch: [amd64, arm64]", "checksum:", "-X main.version={{ .Version }}"} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf(".goreleaser.yaml lacks %q", want)
		}
	}
	dist := filepath.Join(t.TempDir(), "dist")
	moved := regexp.MustCompile(`(?m)^project_name: mrtr$`).ReplaceAllString(string(cfg), "project_name: mrtr\ndist: "+dist)
	if moved == string(cfg) {
		t.Fatal(".goreleaser.yaml has no project_name: mrtr line to put dist after")
	}
	config := filepath.Join(t.TempDir(), "goreleaser.yaml")
	if err := os.WriteFile(config, []byte(moved), 0o644); err != nil {
		t.Fatal(err)
	}
	run("build", "--snapshot", "--single-target", "--clean", "--config", config)

	var meta struct{ Version string }
	data, err := os.ReadFile(filepath.Join(dist, "metadata.json"))
	if err == nil {
		err = json.Unmarshal(data, &meta)
	}
	if err != nil || meta.Version == "" {
		t.Fatalf("dist/metadata.json: %v %q", err, data)
	}
	var artifacts []struct{ Path, Type string }
	data, err = os.ReadFile(filepath.Join(dist, "artifacts.json"))
	if err == nil {
		err = json.Unmarshal(data, &artifacts)
	}
	if err != nil {
		t.Fatalf("dist/artifacts.json: %v", err)
	}
	var bins []string
	for _, a := range artifacts {
		if a.Type == "Binary" {
			bins = append(bins, a.Path)
		}
	}
	if len(bins) != 1 {
		t.Fatalf("binaries built: %q, want one (--single-target)", bins)
	}
	bin := bins[0]
	if !filepath.IsAbs(bin) {
		bin = filepath.Join(repoRoot, bin)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "mrtr "+meta.Version+"\n") {
		t.Fatalf("mrtr version: %v\n%s\nwant mrtr %s", err, out, meta.Version)
	}
}

// unitFile is the systemd unit, relative to the repository.
const unitFile = "deploy/systemd/mrtr.service"

// TestSystemdUnit: systemd-analyze verify accepts the unit without a word
// (it exits 0 on unknown keys and bad values, only printing them, so any
// output fails), systemd-analyze security rates its exposure at most 2.0,
// and the unit is what the docs say: the key ring from LoadCredential=,
// restart on failure, SIGTERM to mrtr alone, TimeoutStopSec longer than
// --drain-timeout, and only flags mrtr proxy has. verify checks that
// ExecStart's program exists, so it runs on a copy naming the mrtr the
// tests built instead of /usr/local/bin/mrtr.
func TestSystemdUnit(t *testing.T) {
	shipSetup.need(t)
	data, err := os.ReadFile(filepath.Join(repoRoot, unitFile))
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(t.TempDir(), "mrtr.service")
	local := strings.ReplaceAll(string(data), "/usr/local/bin/mrtr ", mrtrBin+" ")
	if local == string(data) {
		t.Fatal("the unit does not run /usr/local/bin/mrtr")
	}
	if err := os.WriteFile(unit, []byte(local), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", unit).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) != 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command("systemd-analyze", "security", "--offline=yes", "--threshold=20", unit).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security (exposure above 2.0?): %v\n%s", err, out)
	}

	// The settings of [Service] that matter, as systemd reads them: the
	// last assignment wins.
	service := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, _ := strings.Cut(line, "=")
			service[k] = append(service[k], v)
		}
	}
	last := func(k string) string {
		if v := service[k]; len(v) > 0 {
			return v[len(v)-1]
		}
		return ""
	}
	for k, want := range map[string]string{"Restart": "on-failure", "KillMode": "mixed", "KillSignal": "SIGTERM",
		"LoadCredential": "keys.json:/etc/mrtr/keys.json", "DynamicUser": "yes", "NoNewPrivileges": "yes"} {
		if got := last(k); got != want {
			t.Errorf("%s=%s, want %s", k, got, want)
		}
	}
	args := strings.Fields(last("ExecStart"))
	if len(args) < 2 || args[0] != "/usr/local/bin/mrtr" || args[1] != "proxy" {
		t.Fatalf("ExecStart=%s", last("ExecStart"))
	}
	known, _ := mrtrHelp(t, "proxy")
	values := map[string]string{}
	for i := 2; i < len(args); i += 2 {
		name := strings.TrimPrefix(args[i], "--")
		if !strings.HasPrefix(args[i], "--") || i+1 >= len(args) || !known[name] {
			t.Fatalf("ExecStart=%s: %q is not a flag of mrtr proxy followed by its value", last("ExecStart"), args[i])
		}
		values[name] = args[i+1]
	}
	if values["keys"] != "${CREDENTIALS_DIRECTORY}/keys.json" {
		t.Errorf("--keys %s, want the credential keys.json", values["keys"])
	}
	drain, err := time.ParseDuration(values["drain-timeout"])
	if err != nil {
		t.Fatalf("--drain-timeout: %v", err)
	}
	stop, err := time.ParseDuration(last("TimeoutStopSec"))
	if err != nil || stop <= drain {
		t.Errorf("TimeoutStopSec=%s (%v), not longer than --drain-timeout %v", last("TimeoutStopSec"), err, drain)
	}
}
