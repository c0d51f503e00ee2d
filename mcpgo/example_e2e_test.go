package mcpgo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/mcpgo"
	"github.com/mrtr-go/mrtr/mcpgo/internal/example"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// startExample serves the example server (mcpgo/internal/example) on
// loopback and returns its endpoint.
func startExample(t *testing.T) string {
	t.Helper()
	ring, err := reqstate.GenerateKeyRing("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, a := example.New(mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: replay.NewMemory(nil)}), nil, nil)
	srv := httptest.NewServer(mcpgo.NewHTTPHandler(a))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

const guessMax = 8

// player plays the demo's user: approves deploy, and plays guess_number
// by binary search on the higher/lower hints.
type player struct {
	lo, hi, last, guesses int
}

func (p *player) answer(message string, schema any) map[string]any {
	if !strings.Contains(fmt.Sprint(schema), "guess") {
		return map[string]any{"approve": true}
	}
	switch {
	case p.last == 0:
		p.lo, p.hi = 1, guessMax
	case strings.HasPrefix(message, "higher"):
		p.lo = p.last + 1
	case strings.HasPrefix(message, "lower"):
		p.hi = p.last - 1
	}
	p.last = (p.lo + p.hi) / 2
	p.guesses++
	return map[string]any{"guess": p.last}
}

func (p *player) Elicit(_ context.Context, r mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: p.answer(r.Params.Message, r.Params.RequestedSchema)}}, nil
}

// wantDemo checks what a client got from deploy and guess_number.
func wantDemo(t *testing.T, deploy, guess string, p *player) {
	t.Helper()
	if deploy != "deployed billing to production" {
		t.Errorf("deploy: %q", deploy)
	}
	if guess != "correct: "+strconv.Itoa(p.last) || p.guesses < 1 || p.guesses > 4 {
		t.Errorf("guess_number: %q after %d guesses (last %d)", guess, p.guesses, p.last)
	}
}

// TestExampleWithGoClients plays the demo tools of the example server
// with mcp-go's client and go-sdk's client, on 2026-07-28 and on
// 2025-11-25 (through mcp-go's legacy bridge).
func TestExampleWithGoClients(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run("mcp-go/"+version, func(t *testing.T) {
			p := &player{}
			call := callMCPGo(dialMCPGo(t, startExample(t), version, client.WithElicitationHandler(p)))
			wantDemo(t, call("deploy", map[string]any{"service": "billing", "env": "production"}), call("guess_number", map[string]any{"max": guessMax}), p)
		})
		t.Run("go-sdk/"+version, func(t *testing.T) {
			url := startExample(t)
			p := &player{}
			copts := &sdk.ClientOptions{ElicitationHandler: func(_ context.Context, r *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				return &sdk.ElicitResult{Action: "accept", Content: p.answer(r.Params.Message, r.Params.RequestedSchema)}, nil
			}}
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "go-sdk", Version: "1"}, copts).
				Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: url}, &sdk.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			call := func(name string, args map[string]any) string {
				res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: name, Arguments: args})
				if err != nil {
					return "error: " + err.Error()
				}
				if tc, ok := res.Content[0].(*sdk.TextContent); ok {
					return tc.Text
				}
				return ""
			}
			wantDemo(t, call("deploy", map[string]any{"service": "billing", "env": "production"}), call("guess_number", map[string]any{"max": guessMax}), p)
		})
	}
}

// repoRoot is the main module's root, which holds the pinned harness.
var repoRoot = func() string {
	wd, _ := os.Getwd()
	return filepath.Dir(wd)
}()

// needHarness skips t without the pinned TypeScript SDK and conformance
// harness, installed and current (scripts/conformance-setup.sh --check,
// which installs nothing: make deps does), or fails it when
// MRTR_REQUIRE_CONFORMANCE=1, as the main module's e2e tests do.
func needHarness(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(repoRoot, "scripts", "conformance-setup.sh"), "--check")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		if os.Getenv("MRTR_REQUIRE_CONFORMANCE") == "1" {
			t.Fatalf("MRTR_REQUIRE_CONFORMANCE=1 but %v: %s", err, bytes.TrimSpace(out))
		}
		t.Skipf("%v: %s (set MRTR_REQUIRE_CONFORMANCE=1 to make this a failure)", err, bytes.TrimSpace(out))
	}
	return filepath.Join(repoRoot, "conformance")
}

// TestExampleWithTypeScriptClient plays the demo tools with the
// TypeScript client (@modelcontextprotocol/client 2.4.0, pinned in
// conformance/package.json) through conformance/interop.mjs, on
// 2026-07-28 and on 2025-11-25.
func TestExampleWithTypeScriptClient(t *testing.T) {
	dir := needHarness(t)
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			url := startExample(t)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "node"), "interop.mjs", url)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "MRTR_INTEROP_VERSION="+version)
			cmd.WaitDelay = 5 * time.Second
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			runErr := cmd.Run()
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			var res struct {
				ProtocolVersion string
				Deploy          struct {
					Text      string
					Approvals int
				}
				Guess struct {
					Text    string
					Secret  int
					Guesses int
				}
				Wire struct {
					Methods   map[string]int
					WithState int
				}
				Error string
			}
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil || runErr != nil || res.Error != "" {
				t.Fatalf("interop.mjs: %v %v %s\nstdout:\n%s\nstderr:\n%s", runErr, err, res.Error, stdout.String(), stderr.String())
			}
			t.Logf("interop.mjs: %s", lines[len(lines)-1])
			if res.ProtocolVersion != version || res.Deploy.Text != "deployed billing to production" || res.Deploy.Approvals != 1 {
				t.Errorf("version %q, deploy %q after %d approvals", res.ProtocolVersion, res.Deploy.Text, res.Deploy.Approvals)
			}
			if res.Guess.Text != fmt.Sprintf("correct: %d", res.Guess.Secret) || res.Guess.Guesses < 2 {
				t.Errorf("guess_number: %q (last guess %d after %d guesses)", res.Guess.Text, res.Guess.Secret, res.Guess.Guesses)
			}
			if modern := version == "2026-07-28"; modern != (res.Wire.WithState >= 2) || modern != (res.Wire.Methods["initialize"] == 0) {
				t.Errorf("wire %v with %d resumes carrying requestState: not the %s wire", res.Wire.Methods, res.Wire.WithState, version)
			}
		})
	}
}

// The 14 input-required-result-* scenarios and how many checks each runs
// (37 in all, harness 0.2.0-alpha.12).
var mrtrScenarios = map[string]int{
	"basic-elicitation": 3, "basic-sampling": 3, "basic-list-roots": 3, "request-state": 3,
	"multiple-input-requests": 3, "multi-round": 4, "missing-input-response": 2, "non-tool-request": 3,
	"result-type": 2, "unsupported-methods": 2, "tampered-state": 2, "capability-check": 2,
	"ignore-extra-params": 2, "validate-input": 3,
}

// TestExampleConformance runs the conformance harness's 14
// input-required-result-* scenarios against the example server: every
// check SUCCESS, no WARNING, real sealing (the tampered state is refused
// by the guard).
func TestExampleConformance(t *testing.T) {
	dir := needHarness(t)
	url := startExample(t)
	out := t.TempDir()
	for name := range mrtrScenarios {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "node"), filepath.Join(dir, "node_modules", ".bin", "conformance"),
			"server", "--url", url, "--scenario", "input-required-result-"+name, "-o", out)
		cmd.Dir = dir
		cmd.WaitDelay = 5 * time.Second
		output, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("%s: %v\n%s", name, err, output)
		}
	}
	files, _ := filepath.Glob(filepath.Join(out, "*", "checks.json"))
	scenario := regexp.MustCompile(`^server-input-required-result-(.+)-\d{4}-\d\d-\d\dT`)
	seen := map[string]int{}
	for _, f := range files {
		m := scenario.FindStringSubmatch(filepath.Base(filepath.Dir(f)))
		if m == nil {
			t.Errorf("unexpected results %s", f)
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var checks []struct{ ID, Status, ErrorMessage string }
		if err := json.Unmarshal(data, &checks); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, c := range checks {
			seen[m[1]]++
			if c.Status != "SUCCESS" {
				t.Errorf("%s: %s is %s: %s", m[1], c.ID, c.Status, c.ErrorMessage)
			}
		}
	}
	for name, n := range mrtrScenarios {
		if seen[name] != n {
			t.Errorf("%s: %d checks ran, want %d", name, seen[name], n)
		}
	}
}
