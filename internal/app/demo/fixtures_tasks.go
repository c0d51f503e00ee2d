package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/gosdk"
)

// The fixtures of the official harness's tasks-* scenarios (SEP-2663, the
// io.modelcontextprotocol/tasks extension). greet never runs as a task;
// slow_compute, confirm_delete, multi_input and protocol_error_job run as
// one when the request declares the extension and synchronously
// otherwise; failing_job and test_tool_with_task can only run as one and
// refuse other callers with -32021.

// maxComputeSeconds bounds slow_compute's sleep.
const maxComputeSeconds = 300

type greetArgs struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

type computeArgs struct {
	Seconds float64 `json:"seconds" jsonschema:"how long to work, in seconds (0 for at once)"`
	Label   string  `json:"label,omitempty" jsonschema:"a label echoed in the result"`
}

type deleteArgs struct {
	Filename string `json:"filename" jsonschema:"the file to delete"`
}

type none struct{}

// runMaybeTask runs work as a task when the client declared the
// extension, and on the call otherwise.
func runMaybeTask(ctx context.Context, f *gosdk.ToolFlow[none], work gosdk.TaskFunc) (*mcp.CallToolResult, error) {
	if f.TasksDeclared() {
		return f.RunTask(ctx, nil, work)
	}
	return work(ctx, nil)
}

func addTaskFixtures(a *gosdk.Adapter) {
	gosdk.AddTool(a, &mcp.Tool{Name: "greet", Description: "Greets name at once (never a task)."},
		func(_ context.Context, _ *mcp.CallToolRequest, args greetArgs, _ *gosdk.ToolFlow[none]) (*mcp.CallToolResult, error) {
			return text(fmt.Sprintf("Hello, %s!", args.Name)), nil
		})

	gosdk.AddTool(a, &mcp.Tool{Name: "slow_compute", Description: "Works for seconds, then reports; a task when the client supports tasks, cancellable."},
		func(ctx context.Context, _ *mcp.CallToolRequest, args computeArgs, f *gosdk.ToolFlow[none]) (*mcp.CallToolResult, error) {
			d := time.Duration(min(max(args.Seconds, 0), maxComputeSeconds) * float64(time.Second))
			return runMaybeTask(ctx, f, func(ctx context.Context, t *gosdk.Task) (*mcp.CallToolResult, error) {
				if t != nil {
					_ = t.SetStatus(ctx, fmt.Sprintf("computing %s for %v", args.Label, d))
				}
				if !sleep(ctx, d) {
					return nil, ctx.Err()
				}
				return text(fmt.Sprintf("computed %s in %v", args.Label, d)), nil
			})
		})

	gosdk.AddTool(a, &mcp.Tool{Name: "failing_job", Description: "A task only: fails with a tool error after a second."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ none, f *gosdk.ToolFlow[none]) (*mcp.CallToolResult, error) {
			return f.RunTask(ctx, nil, func(ctx context.Context, _ *gosdk.Task) (*mcp.CallToolResult, error) {
				if !sleep(ctx, time.Second) {
					return nil, ctx.Err()
				}
				return toolError("the job failed: its input was not valid"), nil
			})
		})

	gosdk.AddTool(a, &mcp.Tool{Name: "protocol_error_job", Description: "Panics while it runs: a task that fails with a JSON-RPC error."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ none, f *gosdk.ToolFlow[none]) (*mcp.CallToolResult, error) {
			if !f.TasksDeclared() {
				return nil, gosdk.MissingTasksError()
			}
			return f.RunTask(ctx, nil, func(context.Context, *gosdk.Task) (*mcp.CallToolResult, error) {
				panic("protocol_error_job: a deliberate crash")
			})
		})

	gosdk.AddTool(a, &mcp.Tool{Name: "confirm_delete", Description: "Asks inside a task whether to delete filename (elicitation, key confirm)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, args deleteArgs, f *gosdk.ToolFlow[none]) (*mcp.CallToolResult, error) {
			return f.RunTask(ctx, nil, func(ctx context.Context, t *gosdk.Task) (*mcp.CallToolResult, error) {
				ans, err := t.Ask(ctx, mcp.InputRequestMap{keyConfirm: form(fmt.Sprintf("Delete %s?", args.Filename),
					map[string]any{"confirm": prop("boolean")})})
				if err != nil {
					return nil, err
				}
				if r, ok := ans.Elicited(keyConfirm); ok && r.Action == "accept" && r.Content["confirm"] == true {
					return text(fmt.Sprintf("deleted %s", args.Filename)), nil
				}
				return text(fmt.Sprintf("kept %s", args.Filename)), nil
			})
		})

	gosdk.AddTool(a, &mcp.Tool{Name: "multi_input", Description: "Asks two questions at once inside a task (keys name and confirm)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ none, f *gosdk.ToolFlow[none]) (*mcp.CallToolResult, error) {
			return f.RunTask(ctx, nil, func(ctx context.Context, t *gosdk.Task) (*mcp.CallToolResult, error) {
				ans, err := t.Ask(ctx, mcp.InputRequestMap{
					"name":     askName("What is your name?"),
					keyConfirm: form("Go ahead?", map[string]any{"confirm": prop("boolean")}),
				})
				if err != nil {
					return nil, err
				}
				name, _ := acceptedString(first(ans.Elicited("name")), "name")
				c, _ := ans.Elicited(keyConfirm)
				return text(fmt.Sprintf("name %q, confirmed %v", name, c != nil && c.Action == "accept")), nil
			})
		})

	gosdk.AddTool(a, &mcp.Tool{Name: "test_tool_with_task", Description: "Asks user_name (a paused call), then runs as a task that greets them; a task only."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ none, f *gosdk.ToolFlow[none]) (*mcp.CallToolResult, error) {
			if !f.TasksDeclared() {
				return nil, gosdk.MissingTasksError()
			}
			name, ok := acceptedString(first(f.Elicited(keyUserName)), "name")
			if !ok {
				return f.Ask(none{}, mcp.InputRequestMap{keyUserName: askName("What is your name?")})
			}
			return f.RunTask(ctx, nil, func(ctx context.Context, _ *gosdk.Task) (*mcp.CallToolResult, error) {
				return text(fmt.Sprintf("Hello, %s! (from a task)", name)), nil
			})
		})
}

// first drops the second result of a two-valued accessor.
func first[T any](v T, _ bool) T { return v }
