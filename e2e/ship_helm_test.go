package e2e

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// chartDir is the Helm chart, relative to the repository.
const chartDir = "deploy/helm/mrtr"

// rendered is what `helm template` made of the chart, each manifest decoded
// strictly into its k8s.io/api (or prometheus-operator) type.
type rendered struct {
	deployment     *appsv1.Deployment
	service        *corev1.Service
	pdb            *policyv1.PodDisruptionBudget
	serviceAccount *corev1.ServiceAccount
	secrets        map[string]*corev1.Secret
	serviceMonitor *monitoringv1.ServiceMonitor
	networkPolicy  *networkingv1.NetworkPolicy
}

// helm runs the pinned helm (scripts/ship-setup.sh installs it) in the
// repository and returns its output and error.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(toolPath(t, "helm"), args...)
	cmd.Dir = repoRoot
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		// helm's own words only: the arguments may hold what must not leak.
		return stdout.String(), fmt.Errorf("helm %s: %v: %s", args[0], err, stderr.String())
	}
	return stdout.String(), nil
}

// renderChart runs helm template with args and decodes every manifest.
func renderChart(t *testing.T, args ...string) *rendered {
	t.Helper()
	out, err := helm(t, append([]string{"template", "r", chartDir}, args...)...)
	if err != nil {
		t.Fatalf("%v (values %q)", err, args)
	}
	return decodeManifests(t, out)
}

// decodeManifests decodes each YAML document of a helm template output into
// the type of its apiVersion and kind, refusing unknown fields (a field the
// API server would drop or refuse) and unknown kinds.
func decodeManifests(t *testing.T, out string) *rendered {
	t.Helper()
	r := &rendered{secrets: map[string]*corev1.Secret{}}
	for doc := range strings.SplitSeq(out, "\n---") {
		if strings.TrimSpace(strings.ReplaceAll(doc, "---", "")) == "" {
			continue
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("manifest: %v\n%s", err, doc)
		}
		var obj any
		switch head.APIVersion + " " + head.Kind {
		case "apps/v1 Deployment":
			obj = decodeOnce(t, &r.deployment)
		case "v1 Service":
			obj = decodeOnce(t, &r.service)
		case "policy/v1 PodDisruptionBudget":
			obj = decodeOnce(t, &r.pdb)
		case "v1 ServiceAccount":
			obj = decodeOnce(t, &r.serviceAccount)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			obj = decodeOnce(t, &r.serviceMonitor)
		case "networking.k8s.io/v1 NetworkPolicy":
			obj = decodeOnce(t, &r.networkPolicy)
		case "v1 Secret":
			s := new(corev1.Secret)
			obj = s
			defer func() { r.secrets[s.Name] = s }()
		default:
			t.Fatalf("unexpected manifest %s %s:\n%s", head.APIVersion, head.Kind, doc)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s: %v\n%s", head.Kind, err, doc)
		}
	}
	return r
}

// decodeOnce allocates *p for decoding, failing when a second manifest of
// the same kind arrives.
func decodeOnce[T any](t *testing.T, p **T) *T {
	t.Helper()
	if *p != nil {
		t.Fatalf("two manifests of type %T", *p)
	}
	*p = new(T)
	return *p
}

// mrtrHelp returns the flags and MRTR_* variables `mrtr CMD --help` lists.
func mrtrHelp(t *testing.T, cmd string) (flags, envs map[string]bool) {
	t.Helper()
	out, err := exec.Command(mrtrBin, cmd, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("mrtr %s --help: %v\n%s", cmd, err, out)
	}
	flags, envs = map[string]bool{}, map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  --([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`\$(MRTR_[A-Z0-9_]+)`).FindAllStringSubmatch(string(out), -1) {
		envs[m[1]] = true
	}
	if len(flags) < 10 || !envs["MRTR_REPLAY"] {
		t.Fatalf("mrtr %s --help: found flags %v and variables %v in\n%s", cmd, flags, envs, out)
	}
	return flags, envs
}

// chartArgs splits the container's args into the command, its --name=value
// flags (each checked to be one mrtr CMD has) and what follows "--".
func chartArgs(t *testing.T, c *corev1.Container) (cmd string, flags map[string][]string, command []string) {
	t.Helper()
	if len(c.Command) != 0 || len(c.Args) == 0 {
		t.Fatalf("container command %q, args %q: want the image's entrypoint and args", c.Command, c.Args)
	}
	cmd, flags = c.Args[0], map[string][]string{}
	known, _ := mrtrHelp(t, cmd)
	args := c.Args[1:]
	if i := slices.Index(args, "--"); i >= 0 {
		args, command = args[:i], args[i+1:]
	}
	for _, a := range args {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok {
			t.Fatalf("arg %q: want --name=value", a)
		}
		if !known[name] {
			t.Errorf("arg %q: mrtr %s has no flag --%s", a, cmd, name)
		}
		flags[name] = append(flags[name], value)
	}
	return cmd, flags, command
}

// flagValue returns the one value of flag name, failing unless there is one.
func flagValue(t *testing.T, flags map[string][]string, name string) string {
	t.Helper()
	if v := flags[name]; len(v) == 1 {
		return v[0]
	}
	t.Fatalf("--%s given %d times (%q), want once", name, len(flags[name]), flags[name])
	return ""
}

func port(t *testing.T, c *corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container has no port %q: %+v", name, c.Ports)
	return 0
}

func envVar(t *testing.T, c *corev1.Container, name string) (int, corev1.EnvVar) {
	t.Helper()
	for i, e := range c.Env {
		if e.Name == name {
			return i, e
		}
	}
	t.Fatalf("container has no variable %s", name)
	return 0, corev1.EnvVar{}
}

func selects(t *testing.T, what string, selector map[string]string, podLabels map[string]string) {
	t.Helper()
	if len(selector) == 0 || !labels.SelectorFromSet(selector).Matches(labels.Set(podLabels)) {
		t.Errorf("%s selector %v does not select the pods (%v)", what, selector, podLabels)
	}
}

// TestHelmChartLint: `helm lint --strict` and `helm template` agree: both
// pass with each ci/*-values.yaml (chart-testing's convention), and both
// refuse the defaults, which name no key ring and no upstream (helm lint
// takes a template's fail for information, so the schema must refuse them).
func TestHelmChartLint(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, chartDir, "ci", "*-values.yaml"))
	if err != nil || len(files) < 2 {
		t.Fatalf("ci values files %q (%v), want at least replicas and runner", files, err)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(repoRoot, f)
		if out, err := helm(t, "lint", "--strict", chartDir, "-f", rel); err != nil {
			t.Errorf("lint -f %s: %v\n%s", rel, err, out)
		}
		if out, err := helm(t, "template", "r", chartDir, "-f", rel); err != nil {
			t.Errorf("template -f %s: %v\n%s", rel, err, out)
		}
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"defaults", nil, "/keys/existingSecret"},
		{"no upstream", []string{"--set", "keys.existingSecret=mrtr-keys"}, "/upstream/url"},
	} {
		lint, lerr := helm(t, append([]string{"lint", "--strict", chartDir}, c.args...)...)
		tmpl, terr := helm(t, append([]string{"template", "r", chartDir}, c.args...)...)
		if lerr == nil || terr == nil || !strings.Contains(lerr.Error()+lint, c.want) || !strings.Contains(terr.Error(), c.want) {
			t.Errorf("%s: lint %v, template %v; want both to fail naming %s\nlint:\n%s\ntemplate:\n%s", c.name, lerr, terr, c.want, lint, tmpl)
		}
	}
}

// TestHelmChart: `helm template` of three
// proxies on one Redis (ci/replicas-values.yaml) renders manifests that
// decode strictly into the k8s.io/api types and are wired as the chart
// says: replicas, the Redis URL from a Secret (never in args), the key ring
// from a Secret mounted as a directory (so it is reloaded), --advertise from
// the pod IP of the downward API, probes on the named port, a grace period
// longer than the drain, a PDB, a Service and a ServiceMonitor selecting
// the pods, a non-root read-only container, and only flags mrtr has.
func TestHelmChart(t *testing.T) {
	values := filepath.Join(chartDir, "ci", "replicas-values.yaml")
	r := renderChart(t, "-f", values)
	if r.deployment == nil || r.service == nil || r.pdb == nil || r.serviceAccount == nil || r.serviceMonitor == nil {
		t.Fatalf("missing manifests: %+v", r)
	}
	d := r.deployment
	pod := d.Spec.Template.Spec
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("replicas %v, want 3", d.Spec.Replicas)
	}
	podLabels := d.Spec.Template.Labels
	selects(t, "Deployment", d.Spec.Selector.MatchLabels, podLabels)
	selects(t, "Service", r.service.Spec.Selector, podLabels)
	selects(t, "PodDisruptionBudget", r.pdb.Spec.Selector.MatchLabels, podLabels)
	selects(t, "ServiceMonitor", r.serviceMonitor.Spec.Selector.MatchLabels, r.service.Labels)
	if u := r.pdb.Spec.MaxUnavailable; u == nil || u.IntValue() != 1 {
		t.Errorf("PDB maxUnavailable %v, want 1", u)
	}
	if pod.ServiceAccountName != r.serviceAccount.Name {
		t.Errorf("pod's service account %q, chart's %q", pod.ServiceAccountName, r.serviceAccount.Name)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the service account token is mounted; mrtr calls no Kubernetes API")
	}
	if pod.EnableServiceLinks == nil || *pod.EnableServiceLinks {
		t.Error("enableServiceLinks is not false: a Service named mrtr puts MRTR_* variables into the environment")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := &pod.Containers[0]
	cmd, flags, command := chartArgs(t, c)
	if cmd != "proxy" || command != nil {
		t.Errorf("mrtr %s ... -- %q, want mrtr proxy --upstream", cmd, command)
	}
	if got := flagValue(t, flags, "upstream"); got != "http://my-mcp-server:3000/mcp" {
		t.Errorf("--upstream=%s", got)
	}

	// Listen address and probes on the named port.
	http := port(t, c, "http")
	if got := flagValue(t, flags, "addr"); got != fmt.Sprintf("0.0.0.0:%d", http) {
		t.Errorf("--addr=%s, container port http %d", got, http)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}, {"startup", c.StartupProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe %+v, want GET %s on port http", p.name, p.probe, p.path)
		}
	}
	var svcPorts []string
	for _, p := range r.service.Spec.Ports {
		svcPorts = append(svcPorts, p.Name+">"+p.TargetPort.String())
	}
	if !slices.Equal(svcPorts, []string{"http>http", "metrics>metrics"}) {
		t.Errorf("Service ports %v", svcPorts)
	}

	// The Redis URL: from the chart's Secret through $MRTR_REPLAY, a
	// variable mrtr proxy reads, never in args.
	_, envs := mrtrHelp(t, "proxy")
	_, replay := envVar(t, c, "MRTR_REPLAY")
	if !envs[replay.Name] || replay.ValueFrom == nil || replay.ValueFrom.SecretKeyRef == nil {
		t.Fatalf("MRTR_REPLAY %+v: want a secretKeyRef", replay)
	}
	ref := replay.ValueFrom.SecretKeyRef
	if s := r.secrets[ref.Name]; s == nil || s.StringData[ref.Key] != "redis://redis-master:6379/0" {
		t.Errorf("MRTR_REPLAY from Secret %s key %s: %+v", ref.Name, ref.Key, s)
	}
	if _, ok := flags["replay"]; ok || strings.Contains(strings.Join(c.Args, " "), "redis://") {
		t.Errorf("the Redis URL is in the args: %q", c.Args)
	}
	if d.Spec.Template.Annotations["checksum/redis"] == "" {
		t.Error("no checksum/redis annotation: a new Redis URL would not roll the pods")
	}

	// --advertise: this pod's IP, from the downward API, defined before use.
	if got := flagValue(t, flags, "advertise"); got != fmt.Sprintf("http://$(POD_IP):%d/mcp", http) {
		t.Errorf("--advertise=%s", got)
	}
	if _, ip := envVar(t, c, "POD_IP"); ip.ValueFrom == nil || ip.ValueFrom.FieldRef == nil || ip.ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("POD_IP %+v: want the downward API's status.podIP", ip)
	}

	// The drain ends before SIGKILL.
	drain, err := time.ParseDuration(flagValue(t, flags, "drain-timeout"))
	if err != nil || drain <= 0 {
		t.Fatalf("--drain-timeout: %v %v", drain, err)
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= drain {
		t.Errorf("terminationGracePeriodSeconds %v, not longer than --drain-timeout %v", g, drain)
	}

	// The key ring: a Secret mounted as a directory (a subPath mount would
	// never see an update), read-only, owned by the pod's group.
	keys := flagValue(t, flags, "keys")
	var keyVol *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if filepath.Dir(keys) == m.MountPath {
			keyVol = &c.VolumeMounts[i]
		}
	}
	if keyVol == nil || !keyVol.ReadOnly || keyVol.SubPath != "" {
		t.Fatalf("--keys=%s: mounted by %+v, want a read-only directory mount", keys, keyVol)
	}
	var keySecret *corev1.SecretVolumeSource
	for _, v := range pod.Volumes {
		if v.Name == keyVol.Name {
			keySecret = v.Secret
		}
	}
	if keySecret == nil || keySecret.SecretName != "mrtr-keys" || keySecret.DefaultMode == nil || *keySecret.DefaultMode&0o007 != 0 {
		t.Fatalf("key volume %+v: want Secret mrtr-keys, no access for others", keySecret)
	}
	if len(keySecret.Items) != 1 || keySecret.Items[0].Path != filepath.Base(keys) {
		t.Errorf("key Secret items %+v, --keys=%s", keySecret.Items, keys)
	}

	// Metrics on their own port, scraped by the ServiceMonitor.
	metrics := port(t, c, "metrics")
	if got := flagValue(t, flags, "metrics-addr"); got != "0.0.0.0:"+strconv.Itoa(int(metrics)) {
		t.Errorf("--metrics-addr=%s, container port metrics %d", got, metrics)
	}
	if eps := r.serviceMonitor.Spec.Endpoints; len(eps) != 1 || eps[0].Port != "metrics" || eps[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v", eps)
	}
	if r.serviceMonitor.Labels["release"] != "prometheus" {
		t.Errorf("ServiceMonitor labels %v: metrics.serviceMonitor.labels not applied", r.serviceMonitor.Labels)
	}

	// Non-root, read-only root file system, a writable /tmp, resources.
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 || psc.FSGroup == nil {
		t.Errorf("pod securityContext %+v", psc)
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v", sc)
	}
	tmp := false
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			tmp = tmp || (m.MountPath == "/tmp" && v.Name == m.Name && v.EmptyDir != nil)
		}
	}
	if !tmp {
		t.Error("no emptyDir on /tmp")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v", c.Resources)
	}
}

// TestHelmChartVariants: a command upstream follows "--" after the flags;
// mode serve has serve's flags only; values that would deploy something
// broken (replicas without Redis, no key ring, a password in values, a
// misspelt value the schema does not know) are refused by helm template
// with a message saying what to do.
func TestHelmChartVariants(t *testing.T) {
	base := []string{"--set", "keys.existingSecret=mrtr-keys"}
	t.Run("command upstream", func(t *testing.T) {
		r := renderChart(t, append(base, "--set", "upstream.command={mcp-server-everything,--stdio}", "--set", "runner.image.repository=my/gw",
			"--set", "upstream.env.LOG=debug", "--set", "upstream.env.API_TOKEN=s3cr3t-in-values", "--set", "extraArgs={--max-procs=8}")...)
		pod := r.deployment.Spec.Template.Spec
		_, flags, command := chartArgs(t, &pod.Containers[0])
		if command != nil || flagValue(t, flags, "max-procs") != "8" || flags["upstream"] != nil || flags["upstream-env"] != nil {
			t.Errorf("proxy flags %v -- %q: want --runner, no command, no --upstream-env", flags, command)
		}
		if flags["advertise"] != nil {
			t.Errorf("--advertise without a Redis store: %v", flags["advertise"])
		}
		if r.serviceMonitor != nil || r.networkPolicy != nil || len(r.secrets) != 0 {
			t.Errorf("a ServiceMonitor, NetworkPolicy or Secret without metrics, networkPolicy or Redis: %+v", r)
		}
		runner := container(t, &pod, "runner")
		_, rcommand := runnerArgs(t, runner)
		if !slices.Equal(rcommand, []string{"mcp-server-everything", "--stdio"}) {
			t.Errorf("runner command %q", rcommand)
		}
		// upstream.env: the runner container's env, never an arg of either container.
		for _, c := range pod.Containers {
			if a := strings.Join(c.Args, " "); strings.Contains(a, "LOG=") || strings.Contains(a, "s3cr3t") {
				t.Errorf("container %s: upstream.env in the args: %q", c.Name, c.Args)
			}
		}
		if _, e := envVar(t, runner, "LOG"); e.Value != "debug" {
			t.Errorf("LOG %+v", e)
		}
		if _, e := envVar(t, runner, "API_TOKEN"); e.Value != "s3cr3t-in-values" {
			t.Errorf("API_TOKEN %+v", e)
		}
	})
	t.Run("serve", func(t *testing.T) {
		r := renderChart(t, append(base, "--set", "mode=serve", "--set", "replicaCount=2", "--set", "redis.existingSecret=my-redis")...)
		c := &r.deployment.Spec.Template.Spec.Containers[0]
		cmd, flags, command := chartArgs(t, c)
		if cmd != "serve" || command != nil || flags["drain-timeout"] != nil || flags["advertise"] != nil {
			t.Errorf("mrtr %s %v -- %q", cmd, flags, command)
		}
		if _, e := envVar(t, c, "MRTR_REPLAY"); e.ValueFrom.SecretKeyRef.Name != "my-redis" || e.ValueFrom.SecretKeyRef.Key != "url" {
			t.Errorf("MRTR_REPLAY %+v", e.ValueFrom.SecretKeyRef)
		}
		if len(r.secrets) != 0 {
			t.Errorf("a Secret of the chart's own beside redis.existingSecret: %v", r.secrets)
		}
	})
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"replicas without redis", append(base, "--set", "upstream.url=http://up/mcp", "--set", "replicaCount=3"), "need a shared Redis store"},
		{"no key ring", []string{"--set", "upstream.url=http://up/mcp"}, "/keys/existingSecret"},
		{"no upstream", base, "/upstream/url"},
		{"command without a runner image", append(base, "--set", "upstream.command={mcp-server-everything}"), "runner.image.repository is required"},
		{"runner as the proxy's uid", append(base, "--set", "upstream.command={x}", "--set", "runner.image.repository=r", "--set", "runner.runAsUser=65532"), "must run under another uid"},
		{"runner without fsGroup", append(base, "--set", "upstream.command={x}", "--set", "runner.image.repository=r", "--set", "podSecurityContext.fsGroup=null"), "podSecurityContext.fsGroup is required"},
		{"MRTR_ variable for the command", append(base, "--set", "upstream.command={x}", "--set", "runner.image.repository=r", "--set", "upstream.env.MRTR_KEYS=x"), "MRTR_* variables never reach the command"},
		{"audit without a place", append(base, "--set", "upstream.url=http://up/mcp", "--set", "audit.enabled=true"), "needs a place that outlives the container"},
		{"password in values", append(base, "--set", "upstream.url=http://up/mcp", "--set", "redis.url=redis://:hunter2@redis:6379/0"), "redis.existingSecret instead"},
		{"bad mode", append(base, "--set", "mode=gateway"), "mode"},
		{"misspelt value", append(base, "--set", "upstream.url=http://up/mcp", "--set", "replicaCont=3"), "'replicaCont' not allowed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := helm(t, append([]string{"template", "r", chartDir}, c.args...)...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one saying %q; output:\n%s", err, c.want, out)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the password is in the error: %v", err)
			}
		})
	}
}

// runnerFlags are the flags of `mrtr runner` (shared/DESIGN.md, "Running the
// bridge in production", and its log's); each takes a value.
func runnerFlags() map[string]bool {
	return map[string]bool{"listen": true, "allow-uid": true, "socket-group": true, "max-children": true, "drain-timeout": true,
		"log-format": true, "log-level": true}
}

// runnerArgs splits a runner container's args (mrtr runner --name=value...
// -- COMMAND...) into its flags, each one the runner has, and the command.
func runnerArgs(t *testing.T, c *corev1.Container) (flags map[string][]string, command []string) {
	t.Helper()
	if len(c.Command) != 0 || len(c.Args) == 0 || c.Args[0] != "runner" {
		t.Fatalf("runner container command %q, args %q: want the image's entrypoint (mrtr) and runner", c.Command, c.Args)
	}
	args := c.Args[1:]
	i := slices.Index(args, "--")
	if i < 0 {
		t.Fatalf("runner args %q: no -- COMMAND", c.Args)
	}
	args, command = args[:i], args[i+1:]
	flags = map[string][]string{}
	for _, a := range args {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok || !runnerFlags()[name] {
			t.Errorf("runner arg %q: not --name=value of a flag mrtr runner has", a)
			continue
		}
		flags[name] = append(flags[name], value)
	}
	return flags, command
}

// container is the pod's container named name.
func container(t *testing.T, pod *corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for i := range pod.Containers {
		if pod.Containers[i].Name == name {
			return &pod.Containers[i]
		}
	}
	t.Fatalf("no container %q among %d", name, len(pod.Containers))
	return nil
}

// volumeOf is the pod volume a container mounts at path, or nil.
func volumeOf(pod *corev1.PodSpec, c *corev1.Container, path string) *corev1.Volume {
	for _, m := range c.VolumeMounts {
		if m.MountPath == path {
			for i := range pod.Volumes {
				if pod.Volumes[i].Name == m.Name {
					return &pod.Volumes[i]
				}
			}
		}
	}
	return nil
}

// TestHelmChartRunner: with a command upstream (ci/runner-values.yaml) the
// command runs in a second container, mrtr runner, under a uid other than
// the proxy's and not root, mounting neither the key ring's Secret nor the
// audit volume, in a pod that shares no process namespace; the two share
// only an emptyDir holding the runner's socket, which the proxy names with
// --runner (and starts no command); the runner admits the proxy's uid and
// makes its socket the pod's fsGroup's, which the proxy's user is in;
// upstream.env is the runner's env (a value or a secretKeyRef), never an
// arg; HOME is a writable emptyDir. The audit trail is a file on the claim,
// one per pod; the NetworkPolicy admits /mcp from the named peers and the
// chart's own pods, /metrics from the monitoring namespace.
func TestHelmChartRunner(t *testing.T) {
	r := renderChart(t, "-f", filepath.Join(chartDir, "ci", "runner-values.yaml"))
	pod := r.deployment.Spec.Template.Spec
	if len(pod.Containers) != 2 {
		t.Fatalf("%d containers, want mrtr and runner", len(pod.Containers))
	}
	if pod.ShareProcessNamespace != nil && *pod.ShareProcessNamespace {
		t.Error("shareProcessNamespace: the runner's children would see the proxy's processes")
	}
	proxyC, runnerC := container(t, &pod, "mrtr"), container(t, &pod, "runner")
	cmd, flags, command := chartArgs(t, proxyC)
	if cmd != "proxy" || command != nil || flags["upstream"] != nil {
		t.Fatalf("mrtr %s %v -- %q: want mrtr proxy --runner SOCKET, no command", cmd, flags, command)
	}
	socket := flagValue(t, flags, "runner")
	rflags, rcommand := runnerArgs(t, runnerC)
	if !slices.Equal(rcommand, []string{"mcp-server-everything"}) {
		t.Errorf("runner command %q", rcommand)
	}
	if got := flagValue(t, rflags, "listen"); got != socket {
		t.Errorf("runner --listen=%s, proxy --runner=%s", got, socket)
	}
	if runnerC.Image != "registry.example.com/my-mcp-gateway:1.0.0" {
		t.Errorf("runner image %q", runnerC.Image)
	}

	// Users: the runner another uid than the proxy, never root; it admits the
	// proxy's uid; the socket's group is one the proxy's user is in.
	psc := pod.SecurityContext
	uidOf := func(c *corev1.Container) int64 {
		if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
			return *c.SecurityContext.RunAsUser
		}
		if psc != nil && psc.RunAsUser != nil {
			return *psc.RunAsUser
		}
		t.Fatalf("container %s: no runAsUser", c.Name)
		return 0
	}
	proxyUID, runnerUID := uidOf(proxyC), uidOf(runnerC)
	if runnerUID == proxyUID || runnerUID == 0 {
		t.Errorf("runner uid %d, proxy uid %d: want another, unprivileged uid", runnerUID, proxyUID)
	}
	if got := flagValue(t, rflags, "allow-uid"); got != strconv.FormatInt(proxyUID, 10) {
		t.Errorf("runner --allow-uid=%s, proxy uid %d", got, proxyUID)
	}
	if psc == nil || psc.FSGroup == nil || flagValue(t, rflags, "socket-group") != strconv.FormatInt(*psc.FSGroup, 10) {
		t.Errorf("runner --socket-group=%v, pod fsGroup %+v: want the fsGroup both containers are in", rflags["socket-group"], psc)
	}
	if sc := runnerC.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("runner securityContext %+v", sc)
	}
	if n, err := strconv.Atoi(flagValue(t, rflags, "max-children")); err != nil || n < 17 {
		t.Errorf("runner --max-children=%v: want at least the proxy's default --max-procs (16) plus one", rflags["max-children"])
	}
	if d, err := time.ParseDuration(flagValue(t, rflags, "drain-timeout")); err != nil || pod.TerminationGracePeriodSeconds == nil ||
		time.Duration(*pod.TerminationGracePeriodSeconds)*time.Second <= d {
		t.Errorf("runner --drain-timeout=%v, grace %v: the runner's drain must end before SIGKILL", rflags["drain-timeout"], pod.TerminationGracePeriodSeconds)
	}

	// Volumes: the socket's emptyDir is the only one both mount; the runner
	// mounts no Secret, no claim, nothing the proxy writes.
	sockVol := volumeOf(&pod, proxyC, filepath.Dir(socket))
	if sockVol == nil || sockVol.EmptyDir == nil || volumeOf(&pod, runnerC, filepath.Dir(socket)) != sockVol {
		t.Errorf("socket directory %s: proxy's %+v, runner's %+v: want one emptyDir in both", filepath.Dir(socket), sockVol, volumeOf(&pod, runnerC, filepath.Dir(socket)))
	}
	proxyVols := map[string]bool{}
	for _, m := range proxyC.VolumeMounts {
		proxyVols[m.Name] = true
	}
	for _, m := range runnerC.VolumeMounts {
		v := volumeOf(&pod, runnerC, m.MountPath)
		if v == nil || v.EmptyDir == nil {
			t.Errorf("runner mounts %s at %s: %+v, want emptyDirs only", m.Name, m.MountPath, v)
		}
		if proxyVols[m.Name] && v != sockVol {
			t.Errorf("runner shares the volume %s with the proxy", m.Name)
		}
	}
	_, home := envVar(t, runnerC, "HOME")
	if v := volumeOf(&pod, runnerC, home.Value); v == nil || v.EmptyDir == nil {
		t.Errorf("runner HOME=%s is not a writable emptyDir", home.Value)
	}

	// upstream.env: the runner's env, the token from its Secret; no MRTR_*.
	if _, e := envVar(t, runnerC, "LOG_LEVEL"); e.Value != "debug" {
		t.Errorf("LOG_LEVEL %+v", e)
	}
	if _, e := envVar(t, runnerC, "API_TOKEN"); e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
		e.ValueFrom.SecretKeyRef.Name != "everything-token" || e.ValueFrom.SecretKeyRef.Key != "token" {
		t.Errorf("API_TOKEN %+v: want the secretKeyRef of upstream.env", e)
	}
	for _, e := range runnerC.Env {
		if strings.HasPrefix(e.Name, "MRTR_") {
			t.Errorf("runner env %s: the runner takes no MRTR_* variable", e.Name)
		}
	}
	if len(runnerC.EnvFrom) != 0 {
		t.Errorf("runner envFrom %+v", runnerC.EnvFrom)
	}

	// The audit trail: a file per pod on the claim, in the proxy alone.
	auditPath := flagValue(t, flags, "audit")
	if auditPath != "/var/log/mrtr/$(POD_NAME).audit.jsonl" {
		t.Errorf("--audit=%s", auditPath)
	}
	if _, e := envVar(t, proxyC, "POD_NAME"); e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("POD_NAME %+v", e)
	}
	if v := volumeOf(&pod, proxyC, filepath.Dir(auditPath)); v == nil || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "mrtr-audit" {
		t.Errorf("audit directory %s: volume %+v, want the claim mrtr-audit", filepath.Dir(auditPath), v)
	}
	// Its signing key (issue 37 item 6): per pod, beside the trail on the
	// claim (persistent and writable: it evolves), never in the runner;
	// the node is the pod's name, from the downward API.
	if k := flagValue(t, flags, "audit-key"); k != "/var/log/mrtr/$(POD_NAME).audit.key" {
		t.Errorf("--audit-key=%s, want the pod's key beside its trail", k)
	}
	if n := flagValue(t, flags, "node"); n != "$(POD_NAME)" {
		t.Errorf("--node=%s, want $(POD_NAME)", n)
	}

	// The NetworkPolicy.
	np := r.networkPolicy
	if np == nil {
		t.Fatal("no NetworkPolicy with networkPolicy.enabled")
	}
	selects(t, "NetworkPolicy", np.Spec.PodSelector.MatchLabels, r.deployment.Spec.Template.Labels)
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policyTypes %v", np.Spec.PolicyTypes)
	}
	rules := map[string][]networkingv1.NetworkPolicyPeer{}
	for _, in := range np.Spec.Ingress {
		if len(in.Ports) != 1 || in.Ports[0].Port == nil {
			t.Fatalf("ingress rule %+v: want one named port", in)
		}
		rules[in.Ports[0].Port.String()] = in.From
	}
	if len(rules) != 2 {
		t.Errorf("ingress rules for ports %v, want http and metrics", rules)
	}
	var own, agents bool
	for _, p := range rules["http"] {
		own = own || (p.NamespaceSelector == nil && p.PodSelector != nil && labels.SelectorFromSet(p.PodSelector.MatchLabels).Matches(labels.Set(r.deployment.Spec.Template.Labels)))
		agents = agents || (p.NamespaceSelector != nil && p.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == "agents")
	}
	if !own || !agents {
		t.Errorf("/mcp from %+v: want the chart's own pods (replica forwarding) and networkPolicy.from", rules["http"])
	}
	if m := rules["metrics"]; len(m) != 1 || m[0].NamespaceSelector == nil || m[0].PodSelector != nil ||
		m[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" {
		t.Errorf("/metrics from %+v: want the monitoring namespace", m)
	}
}

// TestHelmChartAudit: audit.stdout gives --audit=- and no volume (mrtr logs
// on stderr, so the two streams stay apart); audit off writes no trail.
func TestHelmChartAudit(t *testing.T) {
	base := []string{"--set", "keys.existingSecret=mrtr-keys", "--set", "upstream.url=http://up/mcp"}
	r := renderChart(t, append(base, "--set", "audit.enabled=true", "--set", "audit.stdout=true", "--set", "audit.required=true")...)
	c := &r.deployment.Spec.Template.Spec.Containers[0]
	_, flags, _ := chartArgs(t, c)
	if flagValue(t, flags, "audit") != "-" || flagValue(t, flags, "audit-required") != "true" {
		t.Errorf("flags %v: want --audit=- --audit-required", flags)
	}
	for _, m := range c.VolumeMounts {
		if m.Name == "audit" {
			t.Errorf("an audit volume with audit.stdout: %+v", m)
		}
	}
	// No place for a key: the ring-derived one (no --audit-key); the node
	// is still the pod's name.
	if flags["audit-key"] != nil || flagValue(t, flags, "node") != "$(POD_NAME)" {
		t.Errorf("flags %v: want no --audit-key and --node=$(POD_NAME) with audit.stdout", flags)
	}
	r = renderChart(t, base...)
	_, flags, _ = chartArgs(t, &r.deployment.Spec.Template.Spec.Containers[0])
	if flags["audit"] != nil || r.networkPolicy != nil {
		t.Errorf("--audit %v or a NetworkPolicy %v by default", flags["audit"], r.networkPolicy)
	}
}
