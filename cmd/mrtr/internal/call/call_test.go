package call

import (
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
)

// TestSampleCleansServerText: a sampling request's roles, system prompt
// and messages are shown without terminal controls.
func TestSampleCleansServerText(t *testing.T) {
	var out strings.Builder
	p := newPrompter(strings.NewReader("reply\n"), &out)
	_, err := p.sample(t.Context(), &mcp.CreateMessageParams{SystemPrompt: "system " + testcmd.Hostile, MaxTokens: 10,
		Messages: []*mcp.SamplingMessage{{Role: mcp.Role("user" + testcmd.Hostile), Content: &mcp.TextContent{Text: "message " + testcmd.Hostile}}}})
	if err != nil {
		t.Fatal(err)
	}
	testcmd.WantClean(t, "the prompt", out.String())
	testcmd.WantInOrder(t, out.String(), "system: system passFAIL!\n", "userpassFAIL!: message passFAIL!\n")
}

// TestIdleTimer pins the --timeout clock on the real time.AfterFunc, in
// a synctest bubble: time at a prompt does not count, nested pauses
// hold, each resume grants a fresh d, and a stopped timer stays stopped.
func TestIdleTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = time.Minute
		var expired atomic.Int32
		w := newIdleTimer(d, nil, func() { expired.Add(1) })
		check := func(when string, want int32) {
			t.Helper()
			synctest.Wait()
			if got := expired.Load(); got != want {
				t.Fatalf("%s: expired %d times, want %d", when, got, want)
			}
		}
		time.Sleep(d - time.Second)
		check("before d", 0)
		w.pause()
		time.Sleep(10 * d)
		check("at a prompt", 0)
		w.pause() // two prompts at once
		w.resume()
		time.Sleep(10 * d)
		check("while one prompt still shows", 0)
		w.resume()
		time.Sleep(d - time.Nanosecond)
		check("just before a fresh d after the prompt", 0)
		time.Sleep(time.Nanosecond)
		check("a fresh d after the prompt", 1)

		s := newIdleTimer(d, nil, func() { t.Error("a stopped timer expired") })
		s.pause()
		s.stop()
		s.resume()
		time.Sleep(10 * d)
		synctest.Wait()

		z := newIdleTimer(0, nil, func() { t.Error("a zero timeout expired") })
		z.pause()
		z.resume()
		time.Sleep(100 * d)
		synctest.Wait()
	})
}
