package proxy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// An upstream that keeps its state in a plain, readable requestState sits
// behind the proxy: the client sees only a sealed token, and a forged
// state never reaches the upstream.
func Example() {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				RequestState string `json:"requestState"`
			} `json:"params"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		result := map[string]any{"resultType": "input_required", "requestState": `{"step":1}`,
			"inputRequests": map[string]any{"confirm": map[string]any{"method": "elicitation/create",
				"params": map[string]any{"message": "Deploy?", "requestedSchema": map[string]any{"type": "object"}}}}}
		if req.Params.RequestState != "" {
			result = map[string]any{"resultType": "complete", "content": []any{
				map[string]any{"type": "text", "text": "upstream got " + req.Params.RequestState}}}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
	}))
	defer upstream.Close()

	ring, _ := reqstate.GenerateKeyRing("2026-11", nil)
	guard := mrtr.New(reqstate.New(ring, nil), &mrtr.Options{ServerID: "deploy-proxy", Store: replay.NewMemory(nil)})
	h, err := proxy.New(proxy.Options{Upstream: upstream.URL + "/mcp", Guard: guard})
	if err != nil {
		panic(err)
	}
	px := httptest.NewServer(h)
	defer px.Close()

	call := func(state string) map[string]any {
		params := map[string]any{"name": "deploy", "_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}}}}
		if state != "" {
			params["requestState"] = state
			params["inputResponses"] = map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{}}}
		}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
		resp, err := http.Post(px.URL, "application/json", bytes.NewReader(body))
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return out
	}

	first := call("")["result"].(map[string]any)
	token := first["requestState"].(string)
	fmt.Println(first["resultType"], "sealed:", strings.HasPrefix(token, "v1.2026-11."))
	fmt.Println("forged:", call(`{"step":9}`)["error"].(map[string]any)["data"])
	fmt.Println(call(token)["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"])
	fmt.Println("replayed:", call(token)["error"].(map[string]any)["data"])
	// Output:
	// input_required sealed: true
	// forged: map[reason:invalid]
	// upstream got {"step":1}
	// replayed: map[reason:replayed]
}
