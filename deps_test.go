package mrtr

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLibraryImportsNoTelemetry keeps the library's packages free of
// Prometheus and OpenTelemetry: they report through Observer, and only
// the command (and internal/app/observe) plugs the two in.
func TestLibraryImportsNoTelemetry(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	// Patterns that match nothing (a package not written yet) are fine:
	// go list warns and lists the rest.
	out, err := exec.Command("go", "list", "-e", "-deps", "-f", "{{.ImportPath}}",
		".", "./reqstate/...", "./replay/...", "./task/...", "./gosdk/...", "./proxy/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 20 || !strings.Contains(string(out), "github.com/mrtr-go/mrtr/gosdk") {
		t.Fatalf("go list listed too little: %q", deps)
	}
	for _, d := range deps {
		for _, banned := range []string{"github.com/prometheus/", "go.opentelemetry.io/"} {
			if strings.HasPrefix(d, banned) {
				t.Errorf("a library package depends on %s", d)
			}
		}
	}
}
