package proxy

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// FuzzRestoreBody: whatever an upstream answers, the check never panics,
// and what reaches the caller as the request's response carries the
// caller's id and no other: the proxy's own id never leaves with it.
func FuzzRestoreBody(f *testing.F) {
	h := &Handler{ids: newIDSource()}
	h.log = slog.New(slog.DiscardHandler)
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":"SENT","result":{}}`,
		`{"jsonrpc":"2.0","id":"SENT","result":{},"id":"SENT"}`,
		`{"id":"\u0053ENT","result":{"_meta":{"io.modelcontextprotocol/subscriptionId":"SENT"}}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":1}}`,
		`[{"jsonrpc":"2.0","id":"SENT","result":{}}]`,
		`{"jsonrpc":"2.0","method":"m","params":{"requestId":"SENT"}}`,
		`not json`,
	} {
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, listen bool) {
		x := h.newExchange([]byte(`"c"`), "tools/call")
		x.listen = listen
		b = bytes.ReplaceAll(b, []byte(`"SENT"`), x.sent)
		out, v := h.restoreBody(context.Background(), x, b)
		if v != ours {
			return
		}
		msg, err := mcpwire.ParseObject(out)
		if err != nil {
			t.Fatalf("the response to the caller is no JSON: %q from %q", out, b)
		}
		if !bytes.Equal(msg["id"], x.caller) {
			t.Fatalf("id %s reached the caller, want %s", msg["id"], x.caller)
		}
	})
}
