package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
)

// mcpClient speaks just enough 2026-07-28 Streamable HTTP to run the
// demo's deploy tool.
type mcpClient struct {
	t   *testing.T
	url string
}

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`

// deploy calls deploy; with state it answers confirm with approve.
func (c mcpClient) deploy(state string) (result map[string]any, rpcErr map[string]any) {
	c.t.Helper()
	extra := ""
	if state != "" {
		extra = `"requestState":` + strconvQuote(state) + `,"inputResponses":{"confirm":{"action":"accept","content":{"approve":true}}},`
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"deploy","arguments":{"service":"api","env":"staging"},` + extra + modernMeta + `}}`
	req, _ := http.NewRequest("POST", c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "deploy")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		c.t.Fatalf("HTTP %d: %s", resp.StatusCode, data)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"id":1`) {
				data = []byte(d)
			}
		}
	}
	var msg struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal(data, &msg); err != nil {
		c.t.Fatalf("response %s: %v", data, err)
	}
	return msg.Result, msg.Error
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// pause starts a deploy and returns its requestState and the key id it
// was sealed under.
func (c mcpClient) pause() (state, kid string) {
	c.t.Helper()
	res, e := c.deploy("")
	st, _ := res["requestState"].(string)
	if e != nil || st == "" {
		c.t.Fatalf("deploy did not pause: %v %v", res, e)
	}
	return st, strings.Split(st, ".")[1]
}

// complete resumes a paused deploy with approval and checks its answer.
func (c mcpClient) complete(state string) {
	c.t.Helper()
	res, e := c.deploy(state)
	if e != nil {
		c.t.Fatalf("resume refused: %v", e)
	}
	content, _ := res["content"].([]any)
	if len(content) != 1 || !strings.Contains(strings.ToLower(jsonText(content[0])), "deployed api to staging") {
		c.t.Fatalf("resume result: %v", res)
	}
}

func jsonText(v any) string { b, _ := json.Marshal(v); return string(b) }

// waitLog waits until the JSON log holds a line with msg and every
// attribute in attrs (an event, not a duration: the deadline only bounds
// a broken run).
func waitLog(t *testing.T, logs *testcmd.Buffer, from int, msg string, attrs map[string]string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		s := logs.String()
		sc := bufio.NewScanner(strings.NewReader(s[from:]))
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) != nil || line["msg"] != msg {
				continue
			}
			ok := true
			for k, v := range attrs {
				ok = ok && strings.Contains(jsonText(line[k]), v)
			}
			if ok {
				return
			}
		}
	}
	t.Fatalf("no log line %q %v in:\n%s", msg, attrs, logs.String()[from:])
}

// TestServeReloadsKeyRing is the reload test of issue 12: `mrtr serve`
// with a key file paused under key A; the file is rewritten with B
// primary and A second; after the reload (noticed by the poll) new pauses
// seal under B and the flow paused under A completes. A malformed file
// then leaves the ring unchanged, and flows keep working.
func TestServeReloadsKeyRing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	a, b := testcmd.GenKey(t, "key-a"), testcmd.GenKey(t, "key-b")
	testcmd.WriteRing(t, path, a)
	url, logs := startServe(t, "--keys", path, "--keys-poll", "20ms")
	c := mcpClient{t, url}

	inFlight, kid := c.pause()
	if kid != "key-a" {
		t.Fatalf("sealed under %q before the rotation", kid)
	}
	mark := len(logs.String())
	testcmd.WriteRing(t, path, b, a)
	waitLog(t, logs, mark, "mrtr key ring reloaded", map[string]string{"primary": "key-b", "trigger": "poll"})

	fresh, kid := c.pause()
	if kid != "key-b" {
		t.Fatalf("sealed under %q after B became primary", kid)
	}
	c.complete(inFlight) // paused under A, completes after the reload

	mark = len(logs.String())
	if err := os.WriteFile(path, []byte(`{"keys":[{"id":"key-c","secret":"not base64!"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	waitLog(t, logs, mark, "mrtr key ring reload refused; the current ring stays", map[string]string{"file": path, "error": "not standard base64"})
	c.complete(fresh)
	if _, kid := c.pause(); kid != "key-b" {
		t.Fatalf("a malformed file changed the sealing key to %q", kid)
	}
	for _, s := range testcmd.SecretForms(a, b) {
		if strings.Contains(logs.String(), s) {
			t.Fatal("a secret in the log")
		}
	}
}

// `mrtr proxy` shares the reload: a rewritten key file is picked up, the
// proxy then seals under the new primary (the key id is in clear in the
// token, "v1.<kid>.…"), and a token it sealed under the old key still
// resumes, since the old key stays in the ring.
func TestProxyReloadsKeyRing(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				RequestState *string `json:"requestState"`
			} `json:"params"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		res := map[string]any{"resultType": "input_required", "requestState": "upstream-state",
			"inputRequests": map[string]any{"ok": map[string]any{"method": "elicitation/create", "params": map[string]any{"message": "ok?", "requestedSchema": map[string]any{"type": "object"}}}}}
		if req.Params.RequestState != nil {
			res = map[string]any{"resultType": "complete", "content": []any{}}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": res})
	}))
	defer up.Close()
	path := filepath.Join(t.TempDir(), "keys.json")
	a, b := testcmd.GenKey(t, "key-a"), testcmd.GenKey(t, "key-b")
	testcmd.WriteRing(t, path, a)
	url, logs := startProxyCmd(t, "--upstream", up.URL, "--keys", path, "--keys-poll", "20ms")
	call := func(state string) map[string]any {
		t.Helper()
		params := map[string]any{"name": "t", "_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}}}}
		if state != "" {
			params["requestState"] = state
			params["inputResponses"] = map[string]any{"ok": map[string]any{"action": "accept"}}
		}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
		resp, err := http.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Result map[string]any `json:"result"`
			Error  map[string]any `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Error != nil {
			t.Fatalf("HTTP %d, error %v (%v)", resp.StatusCode, out.Error, err)
		}
		return out.Result
	}
	pause := func() (tok, kid string) {
		t.Helper()
		tok, _ = call("")["requestState"].(string)
		parts := strings.Split(tok, ".")
		if len(parts) != 3 || parts[0] != "v1" {
			t.Fatalf("no proxy token in the pause (%d parts)", len(parts))
		}
		return tok, parts[1]
	}
	resume := func(tok, what string) {
		t.Helper()
		if res := call(tok); res["resultType"] != "complete" {
			t.Fatalf("%s: resume gave %v", what, res)
		}
	}

	old, kid := pause()
	if kid != "key-a" {
		t.Fatalf("sealed under %q before the rotation", kid)
	}
	mark := len(logs.String())
	testcmd.WriteRing(t, path, b, a)
	waitLog(t, logs, mark, "mrtr key ring reloaded", map[string]string{"primary": "key-b"})
	fresh, kid := pause()
	if kid != "key-b" {
		t.Fatalf("sealed under %q after the reload made key-b primary", kid)
	}
	resume(old, "the token sealed under key-a, still in the ring")
	resume(fresh, "the token sealed under key-b")
}

// --key-seal-warn: the server warns, naming the key, when one key has
// sealed that many tokens in this process, and counts the warning in
// mrtr_key_seal_warnings_total{key_id} for an alert.
func TestServeSealWarning(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	testcmd.WriteRing(t, path, testcmd.GenKey(t, "key-a"))
	url, logs := startServe(t, "--keys", path, "--key-seal-warn", "2", "--metrics-addr", "127.0.0.1:0")
	metricsURL := testcmd.LogURL(t, logs, "mrtr metrics serving")
	c := mcpClient{t, url}
	c.pause()
	if strings.Contains(logs.String(), "sealed many tokens") {
		t.Fatal("warned after one seal")
	}
	if m, _ := scrape(t, metricsURL); m[`mrtr_key_seal_warnings_total{key_id="key-a"}`] != 0 {
		t.Fatal("warning counted after one seal")
	}
	c.pause()
	waitLog(t, logs, 0, "reqstate: key has sealed many tokens in this process; rotate it before every node together reaches the AES-GCM nonce budget",
		map[string]string{"key_id": "key-a", "seals": "2"})
	c.pause()
	c.pause()
	m, _ := scrape(t, metricsURL)
	if got := m[`mrtr_key_seal_warnings_total{key_id="key-a"}`]; got != 2 {
		t.Fatalf("mrtr_key_seal_warnings_total = %v after 4 seals with --key-seal-warn 2, want 2", got)
	}
	if got := m[`mrtr_key_seals_total{key_id="key-a"}`]; got != 4 {
		t.Fatalf("mrtr_key_seals_total = %v, want 4", got)
	}
}

// A key file in which no key can seal now stops startup, naming the file.
func TestServeRefusesRingThatCannotSeal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	k := testcmd.GenKey(t, "key-a")
	k.NotAfter = time.Now().Add(-time.Minute)
	testcmd.WriteRing(t, path, k)
	code, _, errOut := runApp(t, "serve", "--addr", "127.0.0.1:0", "--keys", path)
	if code != 1 || !strings.Contains(errOut, path) || !strings.Contains(errOut, "no key may seal now") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
