package bridge

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/internal/rpc"
)

// Subscriptions through one shared child. A server keeps one
// subscriptions/listen per session and notification type (go-sdk's maps
// are keyed by session, and the end of any listen on the session drops
// them all), and a stdio child is one session for every client. So Direct
// never hands a client's listen to the child: it holds one listen of its
// own there, the hub, for every list-changed notification, and gives each
// client a stream of its own with an acknowledgement and the
// notifications its filter asks for, each tagged with the client's
// request id as its subscription id. Two clients' subscriptions never
// mix, and a client closing its stream ends only its own. Resource
// subscriptions by URI are declined (left out of the acknowledgement):
// changing the hub's URIs would mean ending the child's listen, which
// drops every other client's subscription with it.

const (
	methodListen      = "subscriptions/listen"
	methodAcknowledge = "notifications/subscriptions/acknowledged"
	metaSubscription  = "io.modelcontextprotocol/subscriptionId"
)

// listChanged maps each list-changed notification to its opt-in field.
var listChanged = map[string]string{
	"notifications/tools/list_changed":     "toolsListChanged",
	"notifications/prompts/list_changed":   "promptsListChanged",
	"notifications/resources/list_changed": "resourcesListChanged",
}

// hub is the connection's one listen on the child.
type hub struct {
	acked chan struct{} // closed once allowed is set, or at the end
	done  chan struct{} // closed once end is set

	mu        sync.Mutex
	allowed   map[string]bool // opt-in field -> granted
	end       *rpc.Message    // the child's response; nil when the connection died
	listeners map[*listener]struct{}
}

type listener struct {
	id   json.RawMessage // the client's request id: its subscription id
	want map[string]bool
	ch   chan *rpc.Message
}

// startHub opens the hub; c.mu must not be held.
func (c *directConn) startHub() *hub {
	h := &hub{acked: make(chan struct{}), done: make(chan struct{}), listeners: map[*listener]struct{}{}}
	c.mu.Lock()
	if c.hub != nil {
		h = c.hub
		c.mu.Unlock()
		return h
	}
	c.hub = h
	c.mu.Unlock()
	params, _ := json.Marshal(map[string]any{
		"_meta":         ownMeta(),
		"notifications": map[string]bool{"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true},
	})
	call, err := c.conn.Start(methodListen, params)
	go func() {
		var resp *rpc.Message
		if err == nil {
			resp = <-call.Response()
		}
		h.finish(resp)
		c.mu.Lock()
		if c.hub == h {
			c.hub = nil
		}
		c.tools, c.toolGen = nil, c.toolGen+1
		c.mu.Unlock()
	}()
	return h
}

// ownMeta is the request _meta of the calls Direct makes itself.
func ownMeta() map[string]any {
	return map[string]any{
		mcpwire.MetaProtocolVersion:          ModernVersion,
		mcpwire.MetaClientCapabilities:       map[string]any{},
		"io.modelcontextprotocol/clientInfo": map[string]string{"name": "mrtr", "version": "bridge"},
	}
}

func (h *hub) acknowledge(params json.RawMessage) {
	n, _ := mcpwire.Member(params, "notifications")
	allowed := map[string]bool{}
	for _, k := range listChanged {
		v, _ := mcpwire.Member(n, k)
		allowed[k] = string(v) == "true"
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.allowed == nil && h.end == nil {
		h.allowed = allowed
		close(h.acked)
	}
}

func (h *hub) finish(resp *rpc.Message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.allowed == nil {
		h.allowed = map[string]bool{}
		close(h.acked)
	}
	h.end = resp
	close(h.done)
}

// granted reports whether the hub is live and receives notification kind
// (an opt-in field).
func (h *hub) granted(kind string) bool {
	select {
	case <-h.acked:
	default:
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.done:
		return false
	default:
	}
	return h.allowed[kind]
}

// fanOut gives a list-changed notification to every listener that asked
// for its kind, tagged with the listener's subscription id. It never
// blocks: a listener that has many waiting already misses it (each is
// only a cue to list again).
func (h *hub) fanOut(m *rpc.Message) {
	kind := listChanged[m.Method]
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.listeners {
		if !l.want[kind] {
			continue
		}
		params, err := tagged(m.Params, l.id)
		if err != nil {
			continue
		}
		select {
		case l.ch <- &rpc.Message{Method: m.Method, Params: params}:
		default:
		}
	}
}

// tagged is params with _meta's subscription id set to id.
func tagged(params, id json.RawMessage) (json.RawMessage, error) {
	p := mcpwire.Object{}
	if len(params) > 0 && params[0] == '{' {
		p = mcpwire.SplitObject(mcpwire.TrimSpace(params))
	}
	meta, ok := p.Object("_meta")
	if !ok {
		meta = mcpwire.Object{}
	}
	meta[metaSubscription] = id
	var err error
	if p["_meta"], err = meta.Encode(); err != nil {
		return nil, err
	}
	return p.Encode()
}

// listen serves one client's subscriptions/listen from the hub.
func (c *directConn) listen(ctx context.Context, out *responder, m *rpc.Message, params mcpwire.Object) {
	meta, _ := params.Object("_meta")
	if v, _ := meta.String(mcpwire.MetaProtocolVersion); v != ModernVersion {
		data, _ := json.Marshal(struct {
			Supported []string `json:"supported"`
			Requested string   `json:"requested"`
		}{[]string{ModernVersion}, v})
		out.fail(http.StatusBadRequest, codeUnsupportedVersion, "unsupported protocol version", data)
		return
	}
	if caps, ok := meta[mcpwire.MetaClientCapabilities]; !ok || len(caps) == 0 || caps[0] != '{' {
		out.fail(http.StatusBadRequest, codeInvalidParams, "invalid params: missing or invalid _meta field "+mcpwire.MetaClientCapabilities, nil)
		return
	}
	n, ok := params.Object("notifications")
	if !ok {
		out.fail(http.StatusBadRequest, codeInvalidParams, "invalid params: missing required 'notifications' field", nil)
		return
	}
	h := c.startHub()
	select {
	case <-h.acked:
	case <-ctx.Done():
		return
	}
	l := &listener{id: m.ID, want: map[string]bool{}, ch: make(chan *rpc.Message, 16)}
	h.mu.Lock()
	end, ended := h.end, isClosed(h.done)
	for _, k := range listChanged {
		l.want[k] = string(n[k]) == "true" && h.allowed[k]
	}
	if !ended {
		h.listeners[l] = struct{}{}
	}
	h.mu.Unlock()
	if ended && end == nil {
		out.fail(http.StatusOK, mrtr.CodeInternalError, "upstream failed: the process exited", nil)
		return
	}
	if ended && end.Error != nil {
		b, _ := (&rpc.Message{ID: m.ID, Error: end.Error}).Encode()
		out.send(statusOf(end.Error), b)
		return
	}
	defer func() {
		h.mu.Lock()
		delete(h.listeners, l)
		h.mu.Unlock()
	}()
	grant := map[string]bool{}
	some := false
	for k, v := range l.want {
		if v {
			grant[k], some = true, true
		}
	}
	ack, _ := json.Marshal(map[string]any{"notifications": grant, "_meta": map[string]json.RawMessage{metaSubscription: m.ID}})
	out.sse = true // a listen's answer is always a stream
	out.notify(&rpc.Message{Method: methodAcknowledge, Params: ack})
	if !some || ended {
		// Nothing to wait for, as a server with nothing to grant does.
		out.result(listenResult(m.ID))
		return
	}
	for {
		select {
		case n := <-l.ch:
			out.notify(n)
		case <-h.done:
			if h.end != nil {
				out.result(listenResult(m.ID))
			}
			return // an abrupt end of the child carries no response
		case <-ctx.Done():
			return
		}
	}
}

func listenResult(id json.RawMessage) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"resultType": "complete", "_meta": map[string]json.RawMessage{metaSubscription: id}})
	return b
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
