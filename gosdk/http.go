package gosdk

import (
	"log/slog"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPOptions configures NewHTTPHandler. The zero value is ready to use.
type HTTPOptions struct {
	// MaxRequestBodyBytes caps a request body (413 beyond). Zero means
	// go-sdk's default (4 MiB).
	MaxRequestBodyBytes int64
	// JSONResponse answers 2026-07-28 requests with application/json
	// instead of an event stream when the handler sends no notification.
	JSONResponse bool
	// Logger is passed to go-sdk's transports. Nil means theirs.
	Logger *slog.Logger
	// EventStore lets legacy (2025-11-25) clients resume an event stream
	// that broke mid-call. Nil means go-sdk's bounded in-memory store; the
	// 2026-07-28 wire has no resumability and never uses it.
	EventStore mcp.EventStore
}

// NewHTTPHandler serves s over Streamable HTTP to clients of every
// protocol version on one endpoint: requests whose MCP-Protocol-Version
// header is 2026-07-28 or later go to a stateless handler (no sessions,
// Multi Round-Trip Requests on the wire), all others to a stateful one
// (the 2025-11-25 initialize handshake, where go-sdk's bridge and the
// adapter fulfil input requests through the session). go-sdk's
// protection against DNS rebinding (Host checks on loopback) stays on.
func NewHTTPHandler(s *mcp.Server, opts *HTTPOptions) http.Handler {
	var o HTTPOptions
	if opts != nil {
		o = *opts
	}
	get := func(*http.Request) *mcp.Server { return s }
	modern := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		Stateless: true, JSONResponse: o.JSONResponse, Logger: o.Logger, MaxRequestBodyBytes: o.MaxRequestBodyBytes,
	})
	if o.EventStore == nil {
		o.EventStore = mcp.NewMemoryEventStore(nil)
	}
	legacy := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		Logger: o.Logger, MaxRequestBodyBytes: o.MaxRequestBodyBytes, EventStore: o.EventStore,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("Mcp-Protocol-Version"); v >= modernVersion {
			modern.ServeHTTP(w, r)
			return
		}
		legacy.ServeHTTP(w, r)
	})
}
