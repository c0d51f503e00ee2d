package e2e

import (
	"bytes"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// shipRequireEnv makes the shipping tools (podman, systemd-analyze, helm,
// goreleaser) mandatory: make test sets it.
const shipRequireEnv = "MRTR_REQUIRE_SHIP"

var shipSetup = &setupCheck{script: "ship-setup.sh", requireEnv: shipRequireEnv}

// toolPath is where scripts/ship-setup.sh installed tool (helm or
// goreleaser); t skips or fails as shipSetup says when it is not there.
func toolPath(t *testing.T, tool string) string {
	t.Helper()
	shipSetup.need(t)
	out, err := exec.Command("bash", filepath.Join(repoRoot, "scripts", "ship-setup.sh"), "--path", tool).Output()
	if err != nil {
		t.Fatalf("ship-setup.sh --path %s: %v", tool, err)
	}
	return strings.TrimSpace(string(out))
}

// imageMaxBytes is the bound on the image.
const imageMaxBytes = 40 << 20

// TestImage builds the image as make image does (scripts/image.sh, podman),
// checks its labels, user, entrypoint and size, copies mrtr and the files
// beside it back out of a created (never started) container and runs
// `mrtr version`, which must print the version the image is labelled with.
func TestImage(t *testing.T) {
	shipSetup.need(t)
	suffix := make([]byte, 4)
	rand.Read(suffix)
	version := "0.0.0-test." + hex.EncodeToString(suffix)
	image := "localhost/mrtr-test:" + version
	build := exec.Command("bash", filepath.Join(repoRoot, "scripts", "image.sh"))
	build.Dir = repoRoot
	build.Env = append(os.Environ(), "IMAGE="+image, "VERSION="+version, "ENGINE=podman")
	var stderr bytes.Buffer
	build.Stderr = &stderr
	out, err := build.Output()
	if err != nil {
		t.Fatalf("scripts/image.sh: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() { exec.Command("podman", "rmi", "--force", image).Run() })
	if strings.Contains(stderr.String(), "not consumed") {
		t.Errorf("the build warns of build args it does not use:\n%s", stderr.String())
	}
	if got := strings.TrimSpace(string(out)); got != image {
		t.Fatalf("scripts/image.sh printed %q, want %q", got, image)
	}

	podman := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("podman", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	var inspect []struct {
		Size         int64
		Os           string
		Architecture string
		Config       struct {
			User       string
			Entrypoint []string
			Cmd        []string
			Env        []string
			Labels     map[string]string
		}
	}
	if err := json.Unmarshal([]byte(podman("image", "inspect", image)), &inspect); err != nil || len(inspect) != 1 {
		t.Fatalf("podman image inspect: %v (%d images)", err, len(inspect))
	}
	img := inspect[0]
	t.Logf("%s: %d bytes (%.1f MiB)", image, img.Size, float64(img.Size)/(1<<20))
	if img.Size <= 0 || img.Size >= imageMaxBytes {
		t.Errorf("image size %d bytes, want under %d", img.Size, imageMaxBytes)
	}
	if img.Os != "linux" {
		t.Errorf("os %q", img.Os)
	}
	if img.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (non-root)", img.Config.User)
	}
	if strings.Join(img.Config.Entrypoint, " ") != "/usr/local/bin/mrtr" {
		t.Errorf("entrypoint %q", img.Config.Entrypoint)
	}
	revision, err := exec.Command("git", "-C", repoRoot, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.source":   "https://github.com/mrtr-go/mrtr",
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": strings.TrimSpace(string(revision)),
	} {
		if got := img.Config.Labels[k]; got != want {
			t.Errorf("label %s=%q, want %q", k, got, want)
		}
	}

	// podman create runs nothing; podman cp reads the container's files.
	id := podman("create", image)
	t.Cleanup(func() { exec.Command("podman", "rm", "--force", id).Run() })
	dir := t.TempDir()
	for _, f := range []string{"/usr/local/bin/mrtr", "/etc/passwd", "/etc/group", "/etc/ssl/certs/ca-certificates.crt"} {
		podman("cp", id+":"+f, filepath.Join(dir, filepath.Base(f)))
	}
	got, err := exec.Command(filepath.Join(dir, "mrtr"), "version").CombinedOutput()
	if err != nil {
		t.Fatalf("mrtr version: %v\n%s", err, got)
	}
	if !strings.HasPrefix(string(got), "mrtr "+version+"\n") {
		t.Errorf("mrtr version from the image:\n%s\nwant mrtr %s", got, version)
	}
	// Static: no program interpreter (ld.so), which FROM scratch lacks.
	bin, err := elf.Open(filepath.Join(dir, "mrtr"))
	if err != nil {
		t.Fatal(err)
	}
	defer bin.Close()
	for _, p := range bin.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("mrtr in the image has a program interpreter: it is not static")
		}
	}
	passwd, _ := os.ReadFile(filepath.Join(dir, "passwd"))
	group, _ := os.ReadFile(filepath.Join(dir, "group"))
	if !strings.Contains(string(passwd), "\nmrtr:x:65532:65532:") || !strings.Contains(string(group), "\nmrtr:x:65532:") {
		t.Errorf("passwd\n%s\ngroup\n%s\nwant the user mrtr 65532:65532", passwd, group)
	}
	ca, _ := os.ReadFile(filepath.Join(dir, "ca-certificates.crt"))
	if bytes.Count(ca, []byte("BEGIN CERTIFICATE")) < 50 {
		t.Errorf("the CA bundle holds %d certificates", bytes.Count(ca, []byte("BEGIN CERTIFICATE")))
	}

	t.Run("run", func(t *testing.T) { runImage(t, image, version) })
	t.Run("documented", func(t *testing.T) { runDocumented(t, image, version) })
}

// docsImageCommands are the podman secret create and podman run commands of
// docs/OPERATIONS.md's image section, each split into its words (the
// continuation lines joined).
func docsImageCommands(t *testing.T) (secret, run []string) {
	t.Helper()
	docs := readRepoFile(t, "docs/OPERATIONS.md")
	i := strings.Index(docs, "### The image")
	if i < 0 {
		t.Fatal("docs/OPERATIONS.md has no section The image")
	}
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(docs[i:])
	if m == nil {
		t.Fatal("the image section has no sh block")
	}
	block := strings.ReplaceAll(m[1], "\\\n", " ")
	for line := range strings.SplitSeq(block, "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		switch {
		case len(f) > 2 && f[0] == "podman" && f[1] == "secret" && f[2] == "create":
			secret = f
		case len(f) > 1 && f[0] == "podman" && f[1] == "run":
			run = f
		}
	}
	if secret == nil || run == nil {
		t.Fatalf("the image section's sh block has no podman secret create or podman run:\n%s", m[1])
	}
	return secret, run
}

// runDocumented runs the image section's own commands: podman secret
// create of a key ring, then its podman run, as written but for what this
// sandbox needs (the docs name those flags), a port of the test's own on
// 127.0.0.1, a secret name of the test's own and the image built above.
// The proxy must start on the mounted key ring (no upstream answers, so
// /healthz is 200 and /readyz 503) and log the address it listens on as
// --addr gives it.
func runDocumented(t *testing.T, image, version string) {
	secret, run := docsImageCommands(t)
	docs := readRepoFile(t, "docs/OPERATIONS.md")
	sandbox := podmanRun()
	for _, f := range []string{"--runtime runc", "--ulimit nofile=1024:1024", "--ulimit nproc=1000:1000"} {
		if !strings.Contains(docs, f) {
			t.Errorf("the docs do not name %q, which this host needs", f)
		}
	}
	suffix := strings.TrimPrefix(version, "0.0.0-test.")
	secretName := "mrtr-keys-test-" + suffix
	name := "mrtr-doc-test-" + suffix
	dir := t.TempDir()
	if out, err := exec.Command(mrtrBin, "keygen", "--out", filepath.Join(dir, "keys.json")).CombinedOutput(); err != nil {
		t.Fatalf("mrtr keygen: %v\n%s", err, out)
	}
	replace := func(words []string, from, to string) []string {
		t.Helper()
		var out []string
		found := false
		for _, w := range words {
			if strings.Contains(w, from) {
				found = true
				w = strings.ReplaceAll(w, from, to)
			}
			out = append(out, w)
		}
		if !found {
			t.Fatalf("the documented command %q has no %q", words, from)
		}
		return out
	}
	secret = replace(secret, "mrtr-keys", secretName)
	cmd := exec.Command(secret[0], secret[1:]...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%q: %v\n%s", secret, err, out)
	}
	t.Cleanup(func() { exec.Command("podman", "secret", "rm", secretName).Run() })

	addr := freeAddr(t)
	_, hostPort, _ := strings.Cut(addr, ":")
	run = replace(run, "mrtr-keys", secretName)
	run = replace(run, "8080:8080", "127.0.0.1:"+hostPort+":8080")
	run = replace(run, "localhost/mrtr:VERSION", image)
	// podman [sandbox] run --detach --name NAME [the documented rest]
	args := append(slices.Clip(sandbox), "--detach", "--name", name)
	args = append(args, run[2:]...)
	if out, err := exec.Command("podman", args...).CombinedOutput(); err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Cleanup(func() { exec.Command("podman", "rm", "--force", name).Run() })
	logs := func() string {
		out, _ := exec.Command("podman", "logs", name).CombinedOutput()
		return string(out)
	}
	var resp *http.Response
	var err error
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err = http.Get("http://" + addr + "/healthz"); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("GET /healthz: %v; container log:\n%s", err, logs())
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz: %s; container log:\n%s", resp.Status, logs())
	}
	log := logs()
	if !strings.Contains(log, "file=/run/secrets/keys.json") {
		t.Errorf("the key ring was not read from the secret:\n%s", log)
	}
	if !strings.Contains(log, `msg="mrtr serving" url=http://0.0.0.0:8080/mcp`) {
		t.Errorf("the log does not name the listen address as --addr gives it (0.0.0.0:8080):\n%s", log)
	}
}

// podmanRun is podman run with what this sandbox needs and any host
// allows: runc (crun refuses cgroups mounted in hybrid mode) and resource
// limits lowered below the current ones (raising one, as podman's defaults
// do, needs CAP_SYS_RESOURCE, which the sandbox lacks).
func podmanRun(args ...string) []string {
	return append([]string{"--runtime", "runc", "run", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1000:1000"}, args...)
}

// runImage runs the image as a user would, read-only: mrtr version, then
// mrtr serve on a loopback port of the host's network (the sandbox has no
// container networking), which must answer /healthz and /readyz, run as
// the user 65532, and exit 0 on podman stop's SIGTERM.
func runImage(t *testing.T, image, version string) {
	out, err := exec.Command("podman", podmanRun("--rm", "--network", "none", "--read-only", image, "version")...).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "mrtr "+version+"\n") {
		t.Fatalf("podman run %s version: %v\n%s", image, err, out)
	}

	addr := freeAddr(t)
	name := "mrtr-test-" + strings.TrimPrefix(version, "0.0.0-test.")
	run := exec.Command("podman", podmanRun("--detach", "--name", name, "--network", "host", "--read-only",
		"--env", "MRTR_ADDR="+addr, image)...) // the image's default command: serve
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("podman run --detach: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("podman", "rm", "--force", name).Run() })
	logs := func() string {
		out, _ := exec.Command("podman", "logs", name).CombinedOutput()
		return string(out)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		var resp *http.Response
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if resp, err = http.Get("http://" + addr + path); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatalf("GET %s: %v; container log:\n%s", path, err, logs())
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s; container log:\n%s", path, resp.Status, logs())
		}
	}
	pid, err := exec.Command("podman", "inspect", "--format", "{{.State.Pid}}", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^Uid:\s+65532\s+65532\s+65532\s+65532$`).Match(status) {
		t.Errorf("mrtr in the container does not run as 65532:\n%s", status)
	}
	if out, err := exec.Command("podman", "stop", "--time", "10", name).CombinedOutput(); err != nil {
		t.Fatalf("podman stop: %v\n%s", err, out)
	}
	code, err := exec.Command("podman", "inspect", "--format", "{{.State.ExitCode}}", name).Output()
	if err != nil || strings.TrimSpace(string(code)) != "0" {
		t.Errorf("exit code after SIGTERM %q (%v); container log:\n%s", code, err, logs())
	}
}
