package demo

import (
	"crypto/rand"
	"io"
	"log/slog"
	"maps"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/task"
)

// Defaults of Options.
const (
	DefaultName    = "mrtr"
	DefaultVersion = "dev"
)

// Options for the demo server. The zero value is ready to use.
type Options struct {
	// Name and Version are the server's implementation info. Empty means
	// DefaultName and DefaultVersion.
	Name, Version string
	// Logger receives go-sdk's and the adapter's server-side logs. Nil
	// means discard.
	Logger *slog.Logger
	// Rand is the source of guess_number's secrets. Nil means
	// crypto/rand.Reader; tests may pin it.
	Rand io.Reader
	// Tasks serves the tasks extension and runs the task fixtures. Nil
	// means a manager over a bounded memory store, under the guard's
	// server id.
	Tasks *task.Manager
	// TaskObserver is the Observer of the default Tasks manager (metrics,
	// spans, the audit trail). Nil means none.
	TaskObserver task.Observer
}

// NewServer returns a go-sdk server with every fixture of the official
// conformance suite and the three demo tools registered; the handlers
// that pause are sealed by guard through gosdk.Install. Serve it with
// gosdk.NewHTTPHandler (both protocol generations on one endpoint) or
// over stdio. A nil guard panics; opts may be nil.
//
// The server and its handlers are safe for concurrent use.
func NewServer(guard *mrtr.Guard, opts *Options) *mcp.Server {
	if guard == nil {
		panic("demo: NewServer needs a guard")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}

	s := mcp.NewServer(&mcp.Implementation{Name: o.Name, Version: o.Version}, &mcp.ServerOptions{
		Instructions: "mrtr reference server: the official MCP conformance fixtures and three demo tools " +
			"(deploy, transfer, guess_number) whose multi-round state is sealed by mrtr.",
		Logger:             o.Logger,
		CompletionHandler:  complete,
		SubscribeHandler:   subscribe,
		UnsubscribeHandler: unsubscribe,
	})
	if o.Tasks == nil {
		o.Tasks = task.NewManager(task.NewMemory(nil), &task.Options{Server: guard.Policy().ServerID, Logger: o.Logger,
			Observer: o.TaskObserver})
	}
	a := gosdk.Install(s, guard, &gosdk.Options{Logger: o.Logger, Tasks: o.Tasks})

	addContentFixtures(s)
	addSessionFixtures(a)
	addStatelessFixtures(a)
	addMRTRFixtures(a)
	addResourceFixtures(s)
	addPromptFixtures(s)
	addDemoTools(a, o.Rand)
	addTaskFixtures(a)
	return s
}

// emptyObject is the input schema of a tool without arguments.
func emptyObject() map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{}}
}

// text returns a complete tool result of one text item.
func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// toolError returns a complete tool result flagged isError: a failure the
// model should see, not a protocol error.
func toolError(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// form returns a form-mode elicitation asking message with a flat object
// schema of the given properties, all required.
func form(message string, props map[string]any) *mcp.ElicitParams {
	return &mcp.ElicitParams{Message: message, RequestedSchema: objectSchema(props, slices.Sorted(maps.Keys(props))...)}
}

// prop is a JSON Schema property of the given type.
func prop(typ string) map[string]any { return map[string]any{"type": typ} }

// sample returns a one-message sampling request.
func sample(prompt string, maxTokens int64) *mcp.CreateMessageParams {
	return &mcp.CreateMessageParams{MaxTokens: maxTokens, Messages: []*mcp.SamplingMessage{
		{Role: "user", Content: &mcp.TextContent{Text: prompt}},
	}}
}

// sampledText is the text of a sampling answer, "" when it has none.
func sampledText(r *mcp.CreateMessageWithToolsResult) string {
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return ""
}
