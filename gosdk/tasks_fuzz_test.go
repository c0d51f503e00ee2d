package gosdk

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzTaskNameMismatch: the Mcp-Name check of tasks/* requests reads an
// untrusted body and header; it never panics, and what it answers is a
// 400 with a JSON-RPC -32020 error.
func FuzzTaskNameMismatch(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"abc"}}`), "abc", "tasks/get")
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","method":"tasks/update","params":{"taskId":"abc","inputResponses":{}}}`), " abd ", "tasks/update")
	f.Add([]byte(`{"method":"tasks/cancel","params":{"taskId":7}}`), "", "tasks/cancel")
	f.Add([]byte(`[]`), "a", "tasks/get")
	f.Fuzz(func(t *testing.T, body []byte, name, method string) {
		r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
		r.Header.Set("Mcp-Method", method)
		if name != "" {
			r.Header.Set("Mcp-Name", name)
		}
		w := httptest.NewRecorder()
		if !taskNameMismatch(w, r, body) {
			if w.Body.Len() != 0 {
				t.Fatal("wrote an answer it did not report")
			}
			return
		}
		var msg struct {
			Error struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if w.Code != http.StatusBadRequest || json.Unmarshal(w.Body.Bytes(), &msg) != nil || msg.Error.Code != -32020 {
			t.Fatalf("answered HTTP %d %q", w.Code, w.Body.Bytes())
		}
	})
}
