package e2e

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
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
		// A checkout without a remote (a worktree here) makes goreleaser
		// give up on its git state and call the commit "none"; a remote
		// set for its git commands alone, in the environment, keeps it.
		cmd.Env = append(os.Environ(), "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=remote.origin.url",
			"GIT_CONFIG_VALUE_0=https://github.com/mrtr-go/mrtr.git")
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
	// A snapshot is versioned as make image versions the same tree.
	if want := treeDevVersion(t); meta.Version != want {
		t.Errorf("snapshot version %s, want %s (scripts/image.sh's, mrtr's scheme)", meta.Version, want)
	}

	// The archive of this machine's target (the same archives section, one
	// target): what it holds besides mrtr is scripts/archive-docs.sh --list,
	// and no link of its docs points to a file it lacks.
	one := regexp.MustCompile(`goos: \[linux, darwin, windows\]`).ReplaceAllString(moved, "goos: ["+runtime.GOOS+"]")
	one = regexp.MustCompile(`goarch: \[amd64, arm64\]`).ReplaceAllString(one, "goarch: ["+runtime.GOARCH+"]")
	if err := os.WriteFile(config, []byte(one), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Join(repoRoot, "build", "release-docs")) })
	run("release", "--snapshot", "--clean", "--config", config)
	archives, _ := filepath.Glob(filepath.Join(dist, "mrtr_"+meta.Version+"_"+runtime.GOOS+"_"+runtime.GOARCH+".tar.gz"))
	if len(archives) != 1 {
		entries, _ := os.ReadDir(dist)
		t.Fatalf("archive of %s/%s: %q in %v", runtime.GOOS, runtime.GOARCH, archives, entries)
	}
	checkArchive(t, archives[0])
}

// checkArchive reads a release archive: mrtr, the files
// scripts/archive-docs.sh --list names, and in its Markdown no relative
// link to a file it does not hold and no absolute link into the repository
// but at a commit, to a file the commit has.
func checkArchive(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			data, _ := io.ReadAll(tr)
			files[h.Name] = data
		}
	}
	list, err := exec.Command("bash", filepath.Join(repoRoot, "scripts", "archive-docs.sh"), "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := append(strings.Fields(string(list)), "mrtr")
	var got []string
	for name := range files {
		got = append(got, name)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the archive holds %q, want %q", got, want)
	}
	head, err := exec.Command("git", "-C", repoRoot, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	blob := "https://github.com/mrtr-go/mrtr/blob/" + strings.TrimSpace(string(head)) + "/"
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for name, data := range files {
		if !strings.HasSuffix(name, ".md") {
			continue
		}
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			switch {
			case target == "" || strings.HasPrefix(target, "mailto:"):
			case strings.HasPrefix(target, blob):
				p := strings.TrimPrefix(target, blob)
				if err := exec.Command("git", "-C", repoRoot, "cat-file", "-e", "HEAD:"+p).Run(); err != nil {
					t.Errorf("%s: link %s: the commit has no %s", name, m[1], p)
				}
			case strings.HasPrefix(target, "https://github.com/mrtr-go/mrtr/blob/") || strings.HasPrefix(target, "https://github.com/mrtr-go/mrtr/tree/"):
				if !strings.Contains(target, "/blob/main/") {
					t.Errorf("%s: link %s: into the repository, not at the archive's commit", name, m[1])
				}
			case strings.Contains(target, "://"):
			default:
				if _, ok := files[filepath.Join(filepath.Dir(name), target)]; !ok {
					t.Errorf("%s: link %s: the archive holds no %s", name, m[1], filepath.Join(filepath.Dir(name), target))
				}
			}
		}
	}
}

// treeDevVersion is the version of a build of this tree from no release:
// 0.0.0-dev+REV, REV the first 12 hex digits of HEAD.
func treeDevVersion(t *testing.T) string {
	t.Helper()
	rev, err := exec.Command("git", "-C", repoRoot, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return "0.0.0-dev+" + string(rev[:12])
}

// TestVersionScheme: one scheme for every way mrtr is built off a tag.
// make image (scripts/image.sh) stamps 0.0.0-dev+REV (goreleaser's
// snapshots the same: TestGoreleaser), and a go build of the workspace,
// which records no commit, prints 0.0.0-dev: never a made-up release
// number (cmd/mrtr's TestResolveVersion has go install's vX.Y.Z).
func TestVersionScheme(t *testing.T) {
	cmd := exec.Command("bash", filepath.Join(repoRoot, "scripts", "image.sh"), "--print-version")
	cmd.Env = append(os.Environ(), "VERSION=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/image.sh --print-version: %v", err)
	}
	if got, want := strings.TrimSpace(string(out)), treeDevVersion(t); got != want {
		t.Errorf("scripts/image.sh stamps %s, want %s", got, want)
	}
	out, err = exec.Command(mrtrBin, "version").Output()
	if err != nil || !regexp.MustCompile(`^mrtr 0\.0\.0-dev(\+[0-9a-f]{12})?\n`).Match(out) {
		t.Errorf("mrtr version of the tests' go build: %v\n%s\nwant mrtr 0.0.0-dev", err, out)
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
	data := readRepoFile(t, unitFile)
	analyzeUnits(t, map[string]string{"mrtr.service": data})

	service := unitSettings(t, data)["[Service]"]
	last := func(k string) string { return lastSetting(service, k) }
	if last("LogsDirectory") != "mrtr" {
		t.Errorf("LogsDirectory=%s, want mrtr: --audit needs a writable place under ProtectSystem=strict", last("LogsDirectory"))
	}
	// The audit key (issue 37 item 6): persistent and writable, so it evolves.
	if last("StateDirectory") != "mrtr" || !slices.Contains(service["Environment"], "MRTR_AUDIT_KEY=%S/mrtr/audit.key") {
		t.Errorf("StateDirectory=%s, Environment=%v: want the audit key in the service's state directory (MRTR_AUDIT_KEY=%%S/mrtr/audit.key)", last("StateDirectory"), service["Environment"])
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

// unitSettings reads unit files (a unit, then its drop-ins) as systemd
// does: per section, every assignment in order, an empty one clearing
// what came before (ExecStart= in a drop-in).
func unitSettings(t *testing.T, files ...string) map[string]map[string][]string {
	t.Helper()
	sections := map[string]map[string][]string{}
	for _, data := range files {
		section := ""
		sc := bufio.NewScanner(strings.NewReader(data))
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			switch {
			case line == "" || strings.HasPrefix(line, "#"):
			case strings.HasPrefix(line, "["):
				section = line
				if sections[section] == nil {
					sections[section] = map[string][]string{}
				}
			case section == "":
				t.Fatalf("%q outside a section", line)
			default:
				k, v, _ := strings.Cut(line, "=")
				if v == "" {
					sections[section][k] = nil
					continue
				}
				sections[section][k] = append(sections[section][k], v)
			}
		}
	}
	return sections
}

// lastSetting is the value systemd takes for a single-valued setting k.
func lastSetting(section map[string][]string, k string) string {
	if v := section[k]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

// analyzeUnits runs systemd-analyze verify (which must say nothing) and
// security (exposure at most 2.0) on each unit, given as name and text,
// with /usr/local/bin/mrtr replaced by the mrtr the tests built.
func analyzeUnits(t *testing.T, units map[string]string) {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for name, text := range units {
		local := strings.ReplaceAll(text, "/usr/local/bin/mrtr ", mrtrBin+" ")
		if local == text {
			t.Fatalf("%s does not run /usr/local/bin/mrtr", name)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(local), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	out, err := exec.Command("systemd-analyze", append([]string{"verify"}, paths...)...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) != 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, path := range paths {
		out, err = exec.Command("systemd-analyze", "security", "--offline=yes", "--threshold=20", path).CombinedOutput()
		if err != nil {
			t.Errorf("systemd-analyze security %s (exposure above 2.0?): %v\n%s", filepath.Base(path), err, out)
		}
	}
}

func readRepoFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestSystemdRunner: mrtr-runner.service and the proxy's drop-in
// mrtr.service.d/runner.conf pass systemd-analyze verify without a word and
// security at 2.0 at most, alone and merged with mrtr.service. The runner
// runs as the static user of mrtr-runner.sysusers.conf (never the proxy's
// DynamicUser), with every sandbox setting of mrtr.service
// (RestrictNamespaces=yes kept), and listens in its RuntimeDirectory for
// any uid (a DynamicUser's cannot be named ahead) with the socket's group
// the static group the sysusers file makes, which the proxy joins with
// SupplementaryGroups=; the drop-in replaces ExecStart with --runner on
// that socket and no command, and orders the proxy after the runner (so it
// stops, and drains, first).
func TestSystemdRunner(t *testing.T) {
	shipSetup.need(t)
	proxyUnit := readRepoFile(t, unitFile)
	runnerUnit := readRepoFile(t, "deploy/systemd/mrtr-runner.service")
	dropIn := readRepoFile(t, "deploy/systemd/mrtr.service.d/runner.conf")
	analyzeUnits(t, map[string]string{"mrtr-runner.service": runnerUnit, "mrtr.service": proxyUnit + "\n" + dropIn})

	runner := unitSettings(t, runnerUnit)["[Service]"]
	proxyAll := unitSettings(t, proxyUnit, dropIn)
	proxy, proxyDef := proxyAll["[Service]"], unitSettings(t, proxyUnit)["[Service]"]

	// The sandbox: every setting of mrtr.service but its user, the same.
	for k := range proxyDef {
		switch k {
		case "DynamicUser", "ExecStart", "ExecReload", "LoadCredential", "EnvironmentFile", "LogsDirectory",
			"StateDirectory", "StateDirectoryMode", "Environment": // the proxy's secrets and its audit key
			continue
		}
		if _, ok := runner[k]; !ok || lastSetting(runner, k) != lastSetting(proxyDef, k) {
			t.Errorf("mrtr-runner.service %s=%s (set: %v), mrtr.service has %s=%s", k, lastSetting(runner, k), ok, k, lastSetting(proxyDef, k))
		}
	}
	if lastSetting(runner, "RestrictNamespaces") != "yes" {
		t.Error("mrtr-runner.service loosens RestrictNamespaces=")
	}
	if lastSetting(runner, "StateDirectory") == "mrtr" || slices.ContainsFunc(runner["Environment"], func(e string) bool { return strings.Contains(e, "MRTR_AUDIT_KEY") }) {
		t.Errorf("mrtr-runner.service: StateDirectory %q, Environment %q: the audit key is the proxy's alone", runner["StateDirectory"], runner["Environment"])
	}
	if lastSetting(runner, "DynamicUser") == "yes" || runner["LoadCredential"] != nil || runner["LogsDirectory"] != nil {
		t.Errorf("mrtr-runner.service: DynamicUser %q, LoadCredential %q, LogsDirectory %q: want a static user and no secret", runner["DynamicUser"], runner["LoadCredential"], runner["LogsDirectory"])
	}

	// The users: made by the sysusers file, the runner in the socket's group.
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, "etc"), 0o755)
	if out, err := exec.Command("systemd-sysusers", "--root="+root, filepath.Join(repoRoot, "deploy/systemd/mrtr-runner.sysusers.conf")).CombinedOutput(); err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	pw, _ := os.ReadFile(filepath.Join(root, "etc/passwd"))
	gr, _ := os.ReadFile(filepath.Join(root, "etc/group"))
	passwd, group := string(pw), string(gr)
	user := lastSetting(runner, "User")
	if user == "" || user == "root" || !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(user)+`:x:[1-9][0-9]*:`).MatchString(passwd) {
		t.Errorf("User=%s, the sysusers file makes\n%s", user, passwd)
	}

	// The runner's command line.
	args := strings.Fields(lastSetting(runner, "ExecStart"))
	if len(args) < 3 || args[0] != "/usr/local/bin/mrtr" || args[1] != "runner" {
		t.Fatalf("mrtr-runner.service ExecStart=%s", lastSetting(runner, "ExecStart"))
	}
	flags := map[string]string{}
	i := 2
	for ; i < len(args) && args[i] != "--"; i += 2 {
		name := strings.TrimPrefix(args[i], "--")
		if !strings.HasPrefix(args[i], "--") || i+1 >= len(args) || !runnerFlags()[name] {
			t.Fatalf("ExecStart: %q is not a flag of mrtr runner followed by its value", args[i])
		}
		flags[name] = args[i+1]
	}
	if i >= len(args)-1 || !strings.HasPrefix(args[i+1], "/") {
		t.Errorf("ExecStart: no -- /PATH/TO/COMMAND after the flags: %q", args)
	}
	if flags["allow-uid"] != "any" {
		t.Errorf("--allow-uid %s: the proxy's DynamicUser uid cannot be named ahead, want any", flags["allow-uid"])
	}
	sock := flags["listen"]
	if filepath.Dir(sock) != "/run/"+lastSetting(runner, "RuntimeDirectory") {
		t.Errorf("--listen %s outside RuntimeDirectory=%s", sock, lastSetting(runner, "RuntimeDirectory"))
	}
	sockGroup := flags["socket-group"]
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sockGroup) + `:x:[0-9]+:(.*,)?` + regexp.QuoteMeta(user) + `(,.*)?$`).MatchString(group) {
		t.Errorf("--socket-group %s: not a group of the sysusers file with %s in it:\n%s", sockGroup, user, group)
	}
	if !slices.Contains(strings.Fields(strings.Join(runner["SupplementaryGroups"], " ")), sockGroup) {
		t.Errorf("mrtr-runner.service SupplementaryGroups=%q lacks %s", runner["SupplementaryGroups"], sockGroup)
	}

	// The proxy with the drop-in: --runner on that socket, in its group.
	if !slices.Contains(strings.Fields(strings.Join(proxy["SupplementaryGroups"], " ")), sockGroup) {
		t.Errorf("the proxy's SupplementaryGroups=%q lacks the socket's group %s", proxy["SupplementaryGroups"], sockGroup)
	}
	if len(proxy["ExecStart"]) != 1 {
		t.Fatalf("the drop-in leaves ExecStart %q: want it cleared and set once", proxy["ExecStart"])
	}
	pargs := strings.Fields(proxy["ExecStart"][0])
	known, _ := mrtrHelp(t, "proxy")
	pflags := map[string]string{}
	for i := 2; i < len(pargs); i += 2 {
		name := strings.TrimPrefix(pargs[i], "--")
		if !strings.HasPrefix(pargs[i], "--") || i+1 >= len(pargs) || !known[name] {
			t.Fatalf("the drop-in's ExecStart: %q is not a flag of mrtr proxy followed by its value", pargs[i])
		}
		pflags[name] = pargs[i+1]
	}
	if pflags["runner"] != sock || pflags["upstream"] != "" {
		t.Errorf("the drop-in's ExecStart %q: want --runner %s and no upstream", pargs, sock)
	}
	unit := proxyAll["[Unit]"]
	if !slices.Contains(unit["After"], "mrtr-runner.service") || !slices.Contains(unit["Requires"], "mrtr-runner.service") {
		t.Errorf("the drop-in's [Unit] %v: want Requires= and After=mrtr-runner.service", unit)
	}
}

// TestLogrotateExample: the logrotate file of docs/OPERATIONS.md works with
// the unit: it rotates the trail in the unit's LogsDirectory (the path the
// docs' MRTR_AUDIT names), signals mrtr with systemctl reload (which the
// unit's ExecReload maps to SIGHUP, on which mrtr reopens the file by
// name), reads no pid file nothing writes, and leaves the new file to mrtr
// (nocreate): a DynamicUser has no name to give `create`, and a file
// logrotate made as root would be one mrtr cannot open.
func TestLogrotateExample(t *testing.T) {
	docs := readRepoFile(t, "docs/OPERATIONS.md")
	m := regexp.MustCompile("(?s)```\n(/[^\n]*) \\{\n(.*?)\n\\}\n```").FindStringSubmatch(docs)
	if m == nil {
		t.Fatal("docs/OPERATIONS.md has no logrotate example (a fenced /PATH { ... } block)")
	}
	path, body := m[1], m[2]
	service := unitSettings(t, readRepoFile(t, unitFile))["[Service]"]
	if dir := "/var/log/" + lastSetting(service, "LogsDirectory"); filepath.Dir(path) != dir {
		t.Errorf("logrotate rotates %s; the unit's LogsDirectory is %s", path, dir)
	}
	if !strings.Contains(docs, "MRTR_AUDIT="+path) {
		t.Errorf("the docs never set MRTR_AUDIT=%s, the file the logrotate example rotates", path)
	}
	var post []string
	in := false
	for line := range strings.SplitSeq(body, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == "postrotate":
			in = true
		case f[0] == "endscript":
			in = false
		case in:
			post = append(post, strings.Join(f, " "))
		case f[0] == "create" && len(f) > 2:
			t.Errorf("%q: names an owner; a DynamicUser=yes unit has none to name", line)
		case f[0] == "create" || f[0] == "copytruncate":
			t.Errorf("%q: want nocreate, so that mrtr creates its file itself on SIGHUP", line)
		}
	}
	if !strings.Contains(body, "nocreate") {
		t.Error("no nocreate: logrotate would make the new file as root")
	}
	if !slices.Equal(post, []string{"systemctl reload mrtr"}) {
		t.Errorf("postrotate %q, want systemctl reload mrtr", post)
	}
	if reload := lastSetting(service, "ExecReload"); !regexp.MustCompile(`kill -(HUP|SIGHUP|s HUP) \$MAINPID$`).MatchString(reload) {
		t.Errorf("ExecReload=%s: systemctl reload does not send mrtr SIGHUP", reload)
	}
	if strings.Contains(body, ".pid") {
		t.Error("the example reads a pid file; mrtr writes none")
	}
}
