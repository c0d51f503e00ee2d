package gosdk_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestVerifiedCredentialWithoutSubject pins issue 9 item 9: a verified
// bearer token whose TokenInfo has no UserID is refused, with or without
// an issuer, instead of mapping to the anonymous principal (where every
// such caller would share one binding).
func TestVerifiedCredentialWithoutSubject(t *testing.T) {
	e := startServer(t, serverOpts{})
	for _, token := range []string{"|", "https://id.example|"} {
		cs := connect(t, e, clientOpts{path: "/auth/mcp", token: token, manual: true})
		_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: prodArgs})
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(je.Message, "no subject") {
			t.Fatalf("token %q: %v, want an invalid-request error naming the missing subject", token, err)
		}
	}
	// A credential with a subject still works, and so does no credential.
	for _, o := range []clientOpts{{path: "/auth/mcp", token: "https://id.example|alice", manual: true}, {manual: true}} {
		cs := connect(t, e, o)
		if tok := pauseDeploy(t, cs, prodArgs); tok == "" {
			t.Fatalf("%+v: no pause", o)
		}
	}
}
