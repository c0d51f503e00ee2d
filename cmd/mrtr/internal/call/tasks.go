package call

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/internal/termtext"
	"github.com/mrtr-go/mrtr/task"
)

// Tasks (the io.modelcontextprotocol/tasks extension, SEP-2663): go-sdk's
// client knows nothing of them, so mrtr call declares the extension on
// tools/call itself (declareTasks), sees a CreateTaskResult in the
// response's bytes (taskTap), and follows the task with tasks/get,
// tasks/update and tasks/cancel of its own (taskClient.follow).

// maxTaskBody bounds what mrtr call reads of one response about a task.
const maxTaskBody = 8 << 20

// defaultTaskPoll is the wait between polls when the task suggests none.
const defaultTaskPoll = time.Second

// cancelTimeout bounds the tasks/cancel sent when the call is left.
const cancelTimeout = 5 * time.Second

// declareTasks is a sending middleware that declares the tasks extension
// in the per-request capabilities of tools/call, the one request the
// extension can answer with a task (its "Supported Methods"), and nowhere
// else. go-sdk has put the client's capabilities there already (2026-07-28
// only: a 2025-11-25 request carries none, and gets no task); the
// declared copy is kept for the tasks/* requests, which must carry it too.
func (tc *taskClient) declareTasks(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if p, ok := req.GetParams().(*mcp.CallToolParams); ok && method == "tools/call" {
			if m := p.GetMeta(); m != nil && m[mcp.MetaKeyClientCapabilities] != nil {
				var caps map[string]any
				b, err := json.Marshal(m[mcp.MetaKeyClientCapabilities])
				if err == nil && json.Unmarshal(b, &caps) == nil && caps != nil {
					ext, _ := caps["extensions"].(map[string]any)
					if ext == nil {
						ext = map[string]any{}
					}
					ext[task.Extension] = map[string]any{}
					caps["extensions"] = ext
					m[mcp.MetaKeyClientCapabilities] = caps
					tc.mu.Lock()
					tc.meta = map[string]any{
						mcp.MetaKeyProtocolVersion:    m[mcp.MetaKeyProtocolVersion],
						mcp.MetaKeyClientInfo:         m[mcp.MetaKeyClientInfo],
						mcp.MetaKeyClientCapabilities: caps,
					}
					tc.mu.Unlock()
				}
			}
		}
		return next(ctx, method, req)
	}
}

// taskTap is the HTTP transport under go-sdk's: it keeps the bytes of the
// last tools/call response (up to maxTaskBody), where a CreateTaskResult
// is found.
type taskTap struct {
	base http.RoundTripper

	mu        sync.Mutex
	body      []byte
	truncated bool
}

func (t *taskTap) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil || r.Method != http.MethodPost || r.Header.Get("Mcp-Method") != "tools/call" {
		return resp, err
	}
	t.mu.Lock()
	t.body, t.truncated = nil, false
	t.mu.Unlock()
	resp.Body = &tapBody{ReadCloser: resp.Body, t: t}
	return resp, nil
}

type tapBody struct {
	io.ReadCloser
	t *taskTap
}

func (b *tapBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.t.mu.Lock()
		if len(b.t.body)+n > maxTaskBody {
			b.t.truncated = true
		} else {
			b.t.body = append(b.t.body, p[:n]...)
		}
		b.t.mu.Unlock()
	}
	return n, err
}

// wireTask is a Task as tasks/get and a CreateTaskResult carry it.
type wireTask struct {
	ResultType, TaskID, Status, StatusMessage string
	PollIntervalMs                            int64
	InputRequests                             map[string]json.RawMessage // the outstanding ones
	Result                                    json.RawMessage            // completed: the CallToolResult
	Error                                     *jsonrpc.Error             // failed
}

// messages returns the JSON-RPC messages of a response body: the body, or
// the data of each event of an event stream.
func messages(body []byte) [][]byte {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		return [][]byte{trimmed}
	}
	var out [][]byte
	var data []byte
	flush := func() {
		if len(data) > 0 {
			out = append(out, data)
		}
		data = nil
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, maxTaskBody)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			flush()
			continue
		}
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(d, []byte(" "))...)
		}
	}
	flush()
	return out
}

// created returns the CreateTaskResult of the last tools/call response.
func (t *taskTap) created() (*wireTask, error) {
	t.mu.Lock()
	body, truncated := slices.Clone(t.body), t.truncated
	t.mu.Unlock()
	for _, m := range messages(body) {
		var msg struct {
			Result *wireTask `json:"result"`
		}
		if json.Unmarshal(m, &msg) == nil && msg.Result != nil && msg.Result.ResultType == "task" {
			if msg.Result.TaskID == "" {
				return nil, errors.New("the server answered with a task that has no taskId")
			}
			return msg.Result, nil
		}
	}
	if truncated {
		return nil, fmt.Errorf("the server answered with a task, in a response over %d bytes", maxTaskBody)
	}
	return nil, errors.New("the server answered with a task this client could not read")
}

// isTask reports whether a tools/call result is a CreateTaskResult:
// go-sdk keeps its resultType, and writes it back.
func isTask(res *mcp.CallToolResult) bool {
	b, err := json.Marshal(res)
	if err != nil {
		return false
	}
	var v struct {
		ResultType string `json:"resultType"`
	}
	return json.Unmarshal(b, &v) == nil && v.ResultType == "task"
}

// taskClient sends the extension's requests for one call.
type taskClient struct {
	endpoint string
	http     *http.Client
	stderr   io.Writer
	max      int // --max-rounds: input rounds answered in one task
	answer   func(context.Context, mcp.InputRequestMap) (mcp.InputResponseMap, error)

	mu   sync.Mutex
	meta map[string]any // the tools/call's _meta, with the extension declared
	id   int
}

// rpc sends method with params and decodes its result into out (nil:
// ignored), or returns the server's JSON-RPC error.
func (tc *taskClient) rpc(ctx context.Context, method, taskID string, params map[string]any, out any) error {
	tc.mu.Lock()
	meta := tc.meta
	tc.id++
	id := tc.id
	tc.mu.Unlock()
	params["_meta"] = meta
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tc.endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if v, ok := meta[mcp.MetaKeyProtocolVersion].(string); ok {
		req.Header.Set("MCP-Protocol-Version", v)
	}
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", taskID) // the extension's routing header
	resp, err := tc.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxTaskBody+1))
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: the server answered %s", method, resp.Status)
	}
	if len(raw) > maxTaskBody {
		return fmt.Errorf("%s: the answer is over %d bytes", method, maxTaskBody)
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "application/json" && ct != "text/event-stream" {
		return fmt.Errorf("%s: the server answered with %q, not JSON", method, termtext.Line(ct))
	}
	for _, m := range messages(raw) {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *jsonrpc.Error  `json:"error"`
		}
		if json.Unmarshal(m, &msg) != nil || string(msg.ID) != fmt.Sprint(id) {
			continue
		}
		switch {
		case msg.Error != nil:
			return msg.Error
		case msg.Result == nil:
			return fmt.Errorf("%s: an answer with neither result nor error", method)
		case out != nil:
			if err := json.Unmarshal(msg.Result, out); err != nil {
				return fmt.Errorf("%s: %w", method, err)
			}
		}
		return nil
	}
	return fmt.Errorf("%s: no answer to the request in the response", method)
}

// ErrTaskCancelled reports a task that ended cancelled without this
// client asking.
var ErrTaskCancelled = errors.New("the task was cancelled")

// follow polls the task created until it ends, printing each change of
// its status or status message to stderr, answering its input requests
// at the terminal as a paused call's are answered, and returns its
// result. When ctx ends (Ctrl-C, --timeout) or this client cannot go on
// (an answer it cannot give, --max-rounds), it cancels the task with
// tasks/cancel before returning.
func (tc *taskClient) follow(ctx context.Context, created *wireTask) (res *mcp.CallToolResult, err error) {
	t := created
	id := t.TaskID
	fmt.Fprintf(tc.stderr, "task %s: %s\n", termtext.Line(id), statusLine(t))
	lastLine := statusLine(t)
	defer func() {
		// Left early: by the person, the timeout, or this client; a
		// server that refused a tasks/* request would refuse this too.
		if err != nil && !taskEnded(t.Status) && serverError(err) == nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
			defer cancel()
			if cerr := tc.rpc(cctx, task.MethodCancel, id, map[string]any{"taskId": id}, nil); cerr != nil {
				fmt.Fprintf(tc.stderr, "mrtr call: could not cancel task %s: %v\n", termtext.Line(id), termtext.Line(cerr.Error()))
			} else {
				fmt.Fprintf(tc.stderr, "task %s: cancel sent\n", termtext.Line(id))
			}
		}
	}()
	answered := map[string]bool{}
	rounds := 0
	for first := true; ; first = false {
		if !first {
			if err := tc.wait(ctx, t.PollIntervalMs); err != nil {
				return nil, err
			}
			next := new(wireTask)
			if err := tc.rpc(ctx, task.MethodGet, id, map[string]any{"taskId": id}, next); err != nil {
				return nil, err
			}
			if next.PollIntervalMs == 0 {
				next.PollIntervalMs = t.PollIntervalMs
			}
			t = next
			if line := statusLine(t); line != lastLine {
				fmt.Fprintf(tc.stderr, "task: %s\n", line)
				lastLine = line
			}
		}
		switch t.Status {
		case "completed":
			out := new(mcp.CallToolResult)
			if err := json.Unmarshal(t.Result, out); err != nil {
				return nil, fmt.Errorf("the task completed with a result this client could not read: %w", err)
			}
			return out, nil
		case "failed":
			if t.Error == nil {
				return nil, errors.New("the task failed, with no error")
			}
			return nil, t.Error
		case "cancelled":
			return nil, ErrTaskCancelled
		case "input_required":
			reqs, err := newRequests(t.InputRequests, answered)
			if err != nil {
				return nil, err
			}
			if len(reqs) == 0 {
				continue // all answered: the task has not caught up yet
			}
			if rounds == tc.max {
				return nil, fmt.Errorf("%w: the task asked for input a %s time, and --max-rounds is %d (raise it to go on)",
					ErrClientRounds, ordinal(rounds+1), tc.max)
			}
			resp, err := tc.answer(ctx, reqs)
			if err != nil {
				return nil, err
			}
			rounds++
			for k := range reqs {
				answered[k] = true
			}
			if err := tc.rpc(ctx, task.MethodUpdate, id, map[string]any{"taskId": id, "inputResponses": resp}, nil); err != nil {
				return nil, err
			}
		}
	}
}

// newRequests decodes the input requests not answered yet: a key is
// answered once in a task's life (the spec makes keys unique in it).
func newRequests(raw map[string]json.RawMessage, answered map[string]bool) (mcp.InputRequestMap, error) {
	fresh := map[string]json.RawMessage{}
	for k, v := range raw {
		if !answered[k] {
			fresh[k] = v
		}
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	b, _ := json.Marshal(fresh)
	var reqs mcp.InputRequestMap
	if err := json.Unmarshal(b, &reqs); err != nil {
		return nil, fmt.Errorf("the task asks for input this client cannot read: %w", err)
	}
	return reqs, nil
}

// wait sleeps for the task's poll interval, or until ctx ends.
func (tc *taskClient) wait(ctx context.Context, ms int64) error {
	d := time.Duration(ms) * time.Millisecond
	if d <= 0 {
		d = defaultTaskPoll
	}
	wctx, stop := context.WithTimeout(ctx, d)
	defer stop()
	<-wctx.Done()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// statusLine is a task's status and its message, on one line.
func statusLine(t *wireTask) string {
	s := termtext.Line(t.Status)
	if m := termtext.Line(t.StatusMessage); m != "" {
		s += ": " + m
	}
	return s
}

func taskEnded(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}
