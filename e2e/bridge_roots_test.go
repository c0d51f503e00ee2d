package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serverFilesystem is npm's server-filesystem@2026.8.31 (conformance/
// package.json pins it): a 2025-11-25 server that replaces the
// directories of its command line with the client's roots when it is
// initialized.
func serverFilesystem(t *testing.T) (node, script string) {
	t.Helper()
	return referenceServer(t, "server-filesystem")
}

// fsTree is a directory the operator exposes (data, holding in.txt) and a
// secret beside it that no caller may read.
func fsTree(t *testing.T) (top, data, other, secret string) {
	t.Helper()
	top = t.TempDir()
	if p, err := filepath.EvalSymlinks(top); err == nil {
		top = p
	}
	data, other = filepath.Join(top, "data"), filepath.Join(top, "other")
	secret = filepath.Join(top, "secret.txt")
	for _, d := range []string{data, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(data, "in.txt"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("TOP SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	return top, data, other, secret
}

// fsClient connects a go-sdk v1.8.0 client at version (2026-07-28 through
// the bridge, or 2025-11-25 in a session of its own) that offers top, the
// directory above the operator's, as its root: what an attacker answers.
func fsClient(t *testing.T, ctx context.Context, url, version, top string, seal http.RoundTripper) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "roots-e2e", Version: "1"}, nil)
	client.AddRoots(&mcp.Root{URI: "file://" + top, Name: "everything"})
	opts := &mcp.ClientSessionOptions{}
	if version != "" {
		opts.ProtocolVersion = version
	}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: seal}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func fsCall(t *testing.T, ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return toolText(res), res.IsError
}

// TestBridgeFilesystemRootsBelongToTheOperator: `mrtr proxy -- node
// server-filesystem DATA`, callers offering the directory above DATA as
// their root. Before, the bridge passed the child's roots/list to the
// caller and server-filesystem took the answer as its new boundary: the
// secret beside DATA came back. Now no caller is asked, in a 2026-07-28
// round or in a 2025-11-25 session of its own: the child stays on DATA,
// the secret stays unread, and no round is sealed for roots.
func TestBridgeFilesystemRootsBelongToTheOperator(t *testing.T) {
	node, script := serverFilesystem(t)
	top, data, _, secret := fsTree(t)
	url := startProxy(t, "--", node, script, data)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, version := range []string{"", "2025-11-25"} {
		name := version
		if name == "" {
			name = "2026-07-28"
		}
		t.Run(name, func(t *testing.T) {
			seal := &sealedOnly{t: t}
			cs := fsClient(t, ctx, url, version, top, seal)
			for range 3 { // the first call of a fresh child, and later ones
				if text, _ := fsCall(t, ctx, cs, "list_allowed_directories", map[string]any{}); !strings.Contains(text, data) || strings.Contains(text, top+"\n") || strings.HasSuffix(text, top) {
					t.Fatalf("allowed directories %q, want only %s", text, data)
				}
				if text, isErr := fsCall(t, ctx, cs, "read_text_file", map[string]any{"path": secret}); !isErr || strings.Contains(text, "TOP SECRET") {
					t.Fatalf("a file outside the operator's directory was read: %q (error %v)", text, isErr)
				}
				if text, isErr := fsCall(t, ctx, cs, "read_text_file", map[string]any{"path": filepath.Join(data, "in.txt")}); isErr || !strings.Contains(text, "inside") {
					t.Fatalf("the operator's directory: %q (error %v)", text, isErr)
				}
			}
			if n := seal.sealed(); n != 0 {
				t.Fatalf("%d rounds sealed: the caller was asked for something (roots)", n)
			}
		})
	}
}

// TestBridgeFilesystemOperatorRoots: with --roots OTHER, server-filesystem
// started on DATA is on OTHER from the first call of each fresh child on
// (each caller's, and a 2025-11-25 client's own), whatever the caller
// offers.
func TestBridgeFilesystemOperatorRoots(t *testing.T) {
	node, script := serverFilesystem(t)
	top, data, other, _ := fsTree(t)
	url := startProxy(t, "--auth-hs256-secret", bridgeSecret, "--roots", "file://"+other, "--", node, script, data)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i, sub := range []string{"alice", "bob", "carol"} {
		version := ""
		if i == 2 {
			version = "2025-11-25"
		}
		cs := fsClient(t, ctx, url, version, top, bearerOf(http.DefaultTransport, mint(t, bridgeSecret, sub)))
		text, _ := fsCall(t, ctx, cs, "list_allowed_directories", map[string]any{})
		if !strings.Contains(text, other) || strings.Contains(text, data) {
			t.Fatalf("%s's first call on a fresh child: allowed directories %q, want only %s (--roots)", sub, text, other)
		}
	}
}

// mint is a bearer token for sub of the proxy's --auth-hs256-secret.
func mint(t *testing.T, secret, sub string) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestBridgeFilesystemRootsWithoutInitialized (issue 35, item 1): `mrtr
// proxy --roots file://TOP/public -- node server-filesystem TOP`, and
// 2025-11-25 clients of raw POSTs that do not initialize as the spec
// says: one never sends notifications/initialized, one sends it alongside
// its first call. Before, both reached a child that never asked for
// roots, on TOP, and read TOP/secret.txt; now each sees only public, and
// the secret is "Access denied", as for a client that initializes
// properly.
func TestBridgeFilesystemRootsWithoutInitialized(t *testing.T) {
	node, script := serverFilesystem(t)
	top, public, _, secret := fsTree(t)
	url := startProxy(t, "--roots", "file://"+public, "--", node, script, top)
	for _, kind := range []string{"no initialized", "initialized alongside", "initialized first"} {
		t.Run(kind, func(t *testing.T) {
			id := rawLegacyInit(t, url)
			var alongside chan int
			switch kind {
			case "initialized first":
				if st, _ := rawLegacyPost(url, id, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); st != http.StatusAccepted {
					t.Fatalf("notifications/initialized: %d", st)
				}
			case "initialized alongside":
				alongside = make(chan int, 1)
				go func() {
					st, _ := rawLegacyPost(url, id, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
					alongside <- st
				}()
				t.Cleanup(func() { <-alongside })
			}
			call := func(n int, tool string, args map[string]any) string {
				st, body := rawLegacyPost(url, id, map[string]any{"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
				if st != http.StatusOK {
					t.Fatalf("%s: %d %s", tool, st, body)
				}
				return body
			}
			if body := call(2, "read_text_file", map[string]any{"path": secret}); strings.Contains(body, "TOP SECRET") || !strings.Contains(body, "Access denied") {
				t.Fatalf("the first call read a file outside --roots: %s", body)
			}
			if body := call(3, "list_allowed_directories", map[string]any{}); !strings.Contains(body, public) || strings.Contains(body, `\n`+top+`"`) || strings.Contains(body, `: `+top+`"`) {
				t.Fatalf("allowed directories: %s, want only %s", body, public)
			}
			if body := call(4, "read_text_file", map[string]any{"path": secret}); strings.Contains(body, "TOP SECRET") || !strings.Contains(body, "Access denied") {
				t.Fatalf("a later call read a file outside --roots: %s", body)
			}
		})
	}
}

// rawLegacyInit opens a 2025-11-25 session of raw POSTs, declaring no
// capabilities, and returns its id.
func rawLegacyInit(t *testing.T, url string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, b)
	}
	return id
}

// rawLegacyPost posts msg on a 2025-11-25 session, and returns the status
// and body (-1 when the request failed). It calls no Fatal, so a goroutine
// may use it.
func rawLegacyPost(url, session string, msg map[string]any) (int, string) {
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", session)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return -1, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
