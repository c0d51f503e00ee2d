package bearer_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mrtr-go/mrtr/bearer"
)

// A resource server in front of an MCP handler. Production sets JWKS (or
// leaves it empty for discovery) instead of the development HS256 secret;
// everything else is the same.
func Example() {
	ctx := context.Background()
	secret := []byte("development-only-secret-32-bytes")
	v, err := bearer.New(ctx, &bearer.Options{
		HS256Secret: secret,
		Issuer:      "https://id.example.com",
		Audience:    "https://mcp.example.com/mcp",
		Scopes:      []string{"mcp:tools"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer v.Close()

	mux := http.NewServeMux()
	mux.Handle("/mcp", v.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, _ := bearer.FromContext(r.Context())
		fmt.Fprintf(w, "hello %s from %s", t.Principal.Subject, t.Principal.Issuer)
	})))
	for _, p := range v.MetadataPaths() {
		mux.Handle(p, v.MetadataHandler())
	}

	send := func(token string) {
		req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			fmt.Println(rec.Code, rec.Header().Get("WWW-Authenticate"))
			return
		}
		fmt.Println(rec.Code, rec.Body)
	}
	mint := func(scope string) string {
		tok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
			"iss": "https://id.example.com", "sub": "alice", "aud": "https://mcp.example.com/mcp",
			"scope": scope, "exp": time.Now().Add(time.Minute).Unix(),
		}).SignedString(secret)
		return tok
	}
	send("")
	send(mint("mcp:read"))
	send(mint("mcp:read mcp:tools"))

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, v.MetadataURL(), nil))
	fmt.Println(rec.Body)
	// Output:
	// 401 Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"
	// 403 Bearer error="insufficient_scope", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"
	// 200 hello alice from https://id.example.com
	// {"resource":"https://mcp.example.com/mcp","authorization_servers":["https://id.example.com"],"scopes_supported":["mcp:tools"],"bearer_methods_supported":["header"]}
}
