package probe

import (
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	mrtrprobe "github.com/mrtr-go/mrtr/internal/probe"
)

// TestReportSingular pins issue 30 item 10: a probe of one request says
// so in the singular.
func TestReportSingular(t *testing.T) {
	var out strings.Builder
	a := &base.App{Stdout: &out}
	printProbe(a, "http://127.0.0.1:1/mcp", &mrtrprobe.Report{Era: "2026-07-28", Requests: 1, Unchecked: "a 2025-11-25 server"})
	if !strings.Contains(out.String(), ", 1 request\n") {
		t.Errorf("a probe of one request: %q", out.String())
	}
}
