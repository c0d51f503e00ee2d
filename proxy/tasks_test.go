package proxy_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
)

// taskUpstream is an upstream that implements the tasks extension in the
// simplest way (every task id a bearer capability, as behind the proxy
// every caller looks alike), over a scripted upstream that records every
// request it is sent.
type taskUpstream struct {
	*scripted
	sse bool // answer tools/call with an event stream

	mu    sync.Mutex
	tasks map[string]bool
}

func newTaskUpstream(t *testing.T, sse bool) *taskUpstream {
	t.Helper()
	u := &taskUpstream{sse: sse, tasks: map[string]bool{}}
	u.scripted = newScripted(t, u.answer)
	return u
}

// seenTask is what the upstream received of one request.
type seenTask struct {
	taskID, mcpName string
	responses       json.RawMessage
	listened        []string // a listen request's taskIds
}

func (u *taskUpstream) count() int { return len(u.received()) }

func (u *taskUpstream) last() seenTask {
	all := u.received()
	m := all[len(all)-1]
	var s seenTask
	s.taskID, _ = m.str("taskId")
	s.mcpName = m.header.Get("Mcp-Name")
	s.responses = m.Params["inputResponses"]
	var n struct{ TaskIDs []string }
	json.Unmarshal(m.Params["notifications"], &n)
	s.listened = n.TaskIDs
	return s
}

// only returns the one task id the upstream made.
func (u *taskUpstream) only(t *testing.T) string {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.tasks) != 1 {
		t.Fatalf("the upstream has %d tasks, want 1", len(u.tasks))
	}
	for k := range u.tasks {
		return k
	}
	return ""
}

// taskEvent writes one event of a stream.
func taskEvent(w io.Writer, msg string) { fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg) }

// taskStatus is a notifications/tasks naming id.
func taskStatus(id string) string {
	return `{"jsonrpc":"2.0","method":"notifications/tasks","params":{"taskId":"` + id + `","status":"working","createdAt":"2026-12-01T00:00:00Z","lastUpdatedAt":"2026-12-01T00:00:00Z","ttlMs":60000}}`
}

func (u *taskUpstream) answer(w http.ResponseWriter, m rpcMsg) {
	tid, _ := m.str("taskId")
	reply := func(status int, body string) {
		out := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,` + body + `}`
		if u.sse && m.Method == "tools/call" || m.Method == "jobs/start" {
			taskEvent(w, out)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, out)
	}
	task1 := func(resultType, id string) string {
		return `"result":{"resultType":"` + resultType + `","taskId":"` + id + `","status":"working","createdAt":"2026-12-01T00:00:00Z","lastUpdatedAt":"2026-12-01T00:00:00Z","ttlMs":60000,"pollIntervalMs":100}`
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	switch m.Method {
	case "tools/call", "jobs/start": // jobs/start: a method the proxy does not read
		if m.Method == "jobs/start" {
			w.Header().Set("Content-Type", "text/event-stream")
		}
		var b [24]byte
		rand.Read(b[:])
		id := base64.RawURLEncoding.EncodeToString(b[:])
		u.tasks[id] = true
		if u.sse {
			// A status notification ahead of the CreateTaskResult, in the
			// call's own stream.
			w.Header().Set("Content-Type", "text/event-stream")
			taskEvent(w, taskStatus(id))
		}
		reply(200, task1("task", id))
	case task.MethodGet, task.MethodUpdate, task.MethodCancel:
		switch {
		case m.header.Get("Mcp-Name") != tid:
			reply(400, `"error":{"code":-32020,"message":"header mismatch"}`)
		case !u.tasks[tid]:
			reply(400, `"error":{"code":-32602,"message":"`+task.UnknownMessage+`"}`)
		case m.Method == task.MethodGet:
			reply(200, task1("complete", tid))
		default:
			reply(200, `"result":{"resultType":"complete"}`)
		}
	case "subscriptions/listen":
		// Acknowledges every id it knows of those listed, then reports on
		// every task it has, listed or not (as a careless upstream
		// might), then ends the stream.
		var n struct{ TaskIDs []string }
		json.Unmarshal(m.Params["notifications"], &n)
		acked := []string{}
		for _, id := range n.TaskIDs {
			if u.tasks[id] {
				acked = append(acked, id)
			}
		}
		ack, _ := json.Marshal(acked)
		w.Header().Set("Content-Type", "text/event-stream")
		taskEvent(w, `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"taskIds":`+string(ack)+`}}}`)
		for id := range u.tasks {
			taskEvent(w, taskStatus(id))
		}
		taskEvent(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{}}`)
	default:
		reply(200, `"result":{}`)
	}
}

// whoHeader names the caller in the tests' Principal function; none is
// the anonymous caller.
const whoHeader = "X-Test-Who"

func byHeader(r *http.Request) (reqstate.Principal, error) {
	if w := r.Header.Get(whoHeader); w != "" {
		return reqstate.Principal{Issuer: "https://issuer.test", Subject: w}, nil
	}
	return reqstate.Principal{}, nil
}

// taskProxy is a proxy to up over ring (nil: a fresh one) with the
// principal taken from whoHeader.
func taskProxy(t *testing.T, up string, ring *reqstate.KeyRing, gopts *mrtr.Options) *httptest.Server {
	t.Helper()
	return startProxy(t, up, ring, gopts, &proxy.Options{Principal: byHeader})
}

func tasksMeta(declared bool) map[string]any {
	caps := map[string]any{"elicitation": map[string]any{}}
	if declared {
		caps["extensions"] = map[string]any{task.Extension: map[string]any{}}
	}
	return map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps}
}

// rpc posts one request of method with params as who ("" anonymous) and
// decodes its final message (send).
func rpc(t *testing.T, url, who, method string, params map[string]any, header http.Header) reply {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": method, "params": params})
	hd := http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {method}}
	if who != "" {
		hd.Set(whoHeader, who)
	}
	for k, vs := range header {
		hd[k] = vs
	}
	return send(t, url, string(b), hd)
}

// create starts a task as who and returns the task id the proxy gave.
func create(t *testing.T, url, who string) string {
	t.Helper()
	r := rpc(t, url, who, "tools/call", map[string]any{"name": "job", "arguments": map[string]any{}, "_meta": tasksMeta(true)}, http.Header{"Mcp-Name": {"job"}})
	var id string
	if r.err != nil || r.resultType() != "task" || json.Unmarshal(r.result["taskId"], &id) != nil || id == "" {
		t.Fatalf("tools/call: want a CreateTaskResult, got %d %s", r.status, r.raw)
	}
	return id
}

// aliceTask starts an upstream (sse: answering tools/call with a
// stream) and a proxy to it, and creates a task of alice's through it.
func aliceTask(t *testing.T, sse bool) (up *taskUpstream, px *httptest.Server, id string) {
	t.Helper()
	up = newTaskUpstream(t, sse)
	px = taskProxy(t, up.url(), nil, nil)
	return up, px, create(t, px.URL, "alice")
}

// taskCall sends method naming id as who, with Mcp-Name set as a client
// must set it.
func taskCall(t *testing.T, url, who, method, id string, declared bool) reply {
	t.Helper()
	p := map[string]any{"taskId": id, "_meta": tasksMeta(declared)}
	if method == task.MethodUpdate {
		p["inputResponses"] = map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}
	}
	name := id
	if strings.ContainsAny(id, "\r\n") {
		name = "=?base64?" + base64.StdEncoding.EncodeToString([]byte(id)) + "?="
	}
	return rpc(t, url, who, method, p, http.Header{"Mcp-Name": {name}})
}

func wantUnknownTask(t *testing.T, r reply) {
	t.Helper()
	if r.err == nil || r.err.Code != -32602 || r.err.Message != task.UnknownMessage || r.err.Data != nil || r.status != http.StatusBadRequest || string(r.id) != "9" {
		t.Fatalf("want HTTP 400 and -32602 %q, as the upstream answers an unknown task; got %d %s", task.UnknownMessage, r.status, r.raw)
	}
}

// TestTaskIDSealed: the caller sees a sealed id, never the upstream's,
// and the same string in the CreateTaskResult and every tasks/get; the
// upstream gets its own id in params.taskId and Mcp-Name, and answers
// unchanged.
func TestTaskIDSealed(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprintf("sse=%v", sse), func(t *testing.T) {
			up, px, id := aliceTask(t, sse)
			upstreamID := up.only(t)
			if !strings.HasPrefix(id, "t1.k1.") || strings.Contains(id, upstreamID) || len(id) > proxy.MaxTaskIDLen {
				t.Fatalf("task id %q: want a sealed t1.k1. id that does not show the upstream's %q", id, upstreamID)
			}
			for i := range 3 {
				r := taskCall(t, px.URL, "alice", task.MethodGet, id, true)
				var got string
				if r.err != nil || json.Unmarshal(r.result["taskId"], &got) != nil || got != id {
					t.Fatalf("tasks/get %d: want taskId %q, got %s", i, id, r.raw)
				}
				if s := up.last(); s.taskID != upstreamID || s.mcpName != upstreamID {
					t.Fatalf("the upstream got taskId %q, Mcp-Name %q; want its own id %q in both", s.taskID, s.mcpName, upstreamID)
				}
			}
			r := taskCall(t, px.URL, "alice", task.MethodUpdate, id, true)
			if r.err != nil || r.resultType() != "complete" {
				t.Fatalf("tasks/update: %s", r.raw)
			}
			if s := up.last(); string(s.responses) != `{"confirm":{"action":"accept","content":{"ok":true}}}` {
				t.Fatalf("the upstream got inputResponses %s, want the client's unchanged", s.responses)
			}
			if r := taskCall(t, px.URL, "alice", task.MethodCancel, id, true); r.err != nil {
				t.Fatalf("tasks/cancel: %s", r.raw)
			}
		})
	}
}

// TestTaskOtherCallerRefused: another caller's tasks/get, tasks/update and
// tasks/cancel get exactly the unknown-task answer, and none of them
// reaches the upstream.
func TestTaskOtherCallerRefused(t *testing.T) {
	up := newTaskUpstream(t, false)
	px := taskProxy(t, up.url(), nil, nil)
	for _, tc := range []struct{ owner, other string }{{"alice", "bob"}, {"alice", ""}, {"", "bob"}} {
		id := create(t, px.URL, tc.owner)
		n := up.count()
		for _, m := range []string{task.MethodGet, task.MethodUpdate, task.MethodCancel} {
			wantUnknownTask(t, taskCall(t, px.URL, tc.other, m, id, true))
		}
		if got := up.count(); got != n {
			t.Fatalf("%q's requests for %q's task reached the upstream (%d requests)", tc.other, tc.owner, got-n)
		}
		if r := taskCall(t, px.URL, tc.owner, task.MethodGet, id, true); r.err != nil {
			t.Fatalf("the owner's own tasks/get: %s", r.raw)
		}
	}
}

// TestTaskBadIDsRefused: forged, truncated, altered, over-long, raw
// upstream and moved ids (sealed in front of another upstream, or under
// another server id, with the same ring) all get the unknown-task answer
// (-32021 first when the request does not declare the extension, as the
// upstream's gate comes first), and never reach the upstream.
func TestTaskBadIDsRefused(t *testing.T) {
	ring := testRing(t)
	up := newTaskUpstream(t, false)
	px := taskProxy(t, up.url(), ring, nil)
	other := taskProxy(t, up.srv.URL+"/other", ring, nil) // the same tasks, under another URL
	otherServer := taskProxy(t, up.url(), ring, &mrtr.Options{ServerID: "another"})
	id := create(t, px.URL, "alice")
	raw := up.only(t)
	flip := []byte(id)
	flip[len(flip)-5] ^= 1
	bad := map[string]string{
		"forged":             "t1.k1." + base64.RawURLEncoding.EncodeToString(make([]byte, 60)),
		"truncated":          id[:len(id)-1],
		"altered":            string(flip),
		"over-long":          id + strings.Repeat("A", proxy.MaxTaskIDLen),
		"just over the cap":  "t1.k1." + strings.Repeat("A", proxy.MaxTaskIDLen-len("t1.k1.")+1),
		"the upstream's own": raw,
		"unknown key":        strings.Replace(id, "t1.k1.", "t1.k2.", 1),
		"empty":              "",
		"moved upstream":     create(t, other.URL, "alice"),
		"moved server":       create(t, otherServer.URL, "alice"),
		"with a newline":     id[:20] + "\n" + id[20:],
	}
	n := up.count()
	for name, bid := range bad {
		t.Run(name, func(t *testing.T) {
			for _, m := range []string{task.MethodGet, task.MethodUpdate, task.MethodCancel} {
				wantUnknownTask(t, taskCall(t, px.URL, "alice", m, bid, true))
				r := taskCall(t, px.URL, "alice", m, bid, false)
				if r.err == nil || r.err.Code != -32021 || r.status != http.StatusBadRequest || !bytes.Contains(r.err.Data, []byte(task.Extension)) {
					t.Fatalf("%s without the extension declared: want 400 and -32021 naming it, got %d %s", m, r.status, r.raw)
				}
			}
		})
	}
	// A taskId that is no string, and a member differing from taskId only
	// in case (encoding/json would read it as taskId), never pass either.
	r := rpc(t, px.URL, "alice", task.MethodGet, map[string]any{"taskId": 7, "_meta": tasksMeta(true)}, nil)
	wantUnknownTask(t, r)
	r = rpc(t, px.URL, "alice", task.MethodGet, map[string]any{"TaskId": raw, "_meta": tasksMeta(true)}, nil)
	if r.err == nil || r.err.Code != -32600 {
		t.Fatalf("a TaskId member: want -32600, got %s", r.raw)
	}
	if got := up.count(); got != n {
		t.Fatalf("%d requests naming no task of the caller's reached the upstream", got-n)
	}
}

// TestTaskIDKeyRotation: a task id keeps opening, and is the same string,
// after the ring's primary changes, while its key is in the ring (its
// window closed too); new ids are sealed with the new primary; once the
// key leaves the ring, the id is an unknown task.
func TestTaskIDKeyRotation(t *testing.T) {
	up := newTaskUpstream(t, false)
	k1 := testRing(t).Keys()[0]
	ring1, _ := reqstate.NewKeyRing(k1)
	codec := reqstate.New(ring1, nil)
	h, err := proxy.New(proxy.Options{Upstream: up.url(), Guard: mrtr.New(codec, nil), Principal: byHeader})
	if err != nil {
		t.Fatal(err)
	}
	px := httptest.NewServer(h)
	defer px.Close()
	id := create(t, px.URL, "alice")

	k2, _ := reqstate.GenerateKey("k2", nil)
	retired := k1
	retired.NotAfter = retired.NotBefore.Add(1) // its window long closed
	ring2, err := reqstate.NewKeyRing(k2, retired)
	if err != nil {
		t.Fatal(err)
	}
	if err := codec.SetKeyRing(ring2); err != nil {
		t.Fatal(err)
	}
	r := taskCall(t, px.URL, "alice", task.MethodGet, id, true)
	var got string
	if r.err != nil || json.Unmarshal(r.result["taskId"], &got) != nil || got != id {
		t.Fatalf("after rotation: want %q, got %s", id, r.raw)
	}
	if id2 := create(t, px.URL, "alice"); !strings.HasPrefix(id2, "t1.k2.") {
		t.Fatalf("a new task id after rotation: %q, want one sealed with k2", id2)
	}
	ring3, _ := reqstate.NewKeyRing(k2)
	if err := codec.SetKeyRing(ring3); err != nil {
		t.Fatal(err)
	}
	wantUnknownTask(t, taskCall(t, px.URL, "alice", task.MethodGet, id, true))
}

// TestTaskIDAcrossReplicas: two proxies sharing a ring (and nothing else)
// in front of one upstream serve each other's tasks: nothing of a task is
// kept on the replica that created it, and both give the caller the same
// string.
func TestTaskIDAcrossReplicas(t *testing.T) {
	up := newTaskUpstream(t, false)
	ring := testRing(t)
	a := taskProxy(t, up.url(), ring, nil)
	b := taskProxy(t, up.url(), ring, nil)
	id := create(t, a.URL, "alice")
	for _, px := range []string{b.URL, a.URL, b.URL} {
		r := taskCall(t, px, "alice", task.MethodGet, id, true)
		var got string
		if r.err != nil || json.Unmarshal(r.result["taskId"], &got) != nil || got != id {
			t.Fatalf("tasks/get on a replica: want %q, got %s", id, r.raw)
		}
	}
	if r := taskCall(t, b.URL, "alice", task.MethodCancel, id, true); r.err != nil {
		t.Fatalf("tasks/cancel on the other replica: %s", r.raw)
	}
	wantUnknownTask(t, taskCall(t, b.URL, "bob", task.MethodGet, id, true))
}

// TestTaskRequestWithoutID: a tasks/* notification (no id) is refused and
// never reaches the upstream.
func TestTaskRequestWithoutID(t *testing.T) {
	up, px, id := aliceTask(t, false)
	n := up.count()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": task.MethodCancel, "params": map[string]any{"taskId": id}})
	resp, err := http.Post(px.URL, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || up.count() != n {
		t.Fatalf("a tasks/cancel notification: status %d, %d upstream requests; want 400 and none", resp.StatusCode, up.count()-n)
	}
}

// TestTaskIDInStreams: a status notification in a tools/call's own stream
// carries the same sealed id as its CreateTaskResult; a listen request
// reaches the upstream naming only the caller's own tasks, by the
// upstream's ids (another caller's and forged ids become "", which names
// no task), and its stream names tasks only as the caller does: the
// acknowledgement lists the caller's ids, and a notification of a task the
// caller did not name never reaches it, nor does any upstream id.
func TestTaskIDInStreams(t *testing.T) {
	for _, wide := range []bool{false, true} {
		t.Run(fmt.Sprintf("wide=%v", wide), func(t *testing.T) { taskIDInStreams(t, wide) })
	}
}

func taskIDInStreams(t *testing.T, wide bool) {
	up := newTaskUpstream(t, true)
	px := taskProxy(t, up.url(), nil, nil)

	r := rpc(t, px.URL, "alice", "tools/call", map[string]any{"name": "job", "arguments": map[string]any{}, "_meta": tasksMeta(true)}, http.Header{"Mcp-Name": {"job"}})
	var a1 string
	json.Unmarshal(r.result["taskId"], &a1)
	up1 := up.only(t)
	evs := events(r.raw)
	if len(evs) != 2 || !bytes.Contains(evs[0], []byte(`"taskId":"`+a1+`"`)) || bytes.Contains(r.raw, []byte(up1)) {
		t.Fatalf("tools/call stream: want a notification naming %q, then the CreateTaskResult, and no upstream id; got %s", a1, r.raw)
	}
	a2 := create(t, px.URL, "alice")
	b1 := create(t, px.URL, "bob")

	n := up.count()
	listen := map[string]any{"_meta": tasksMeta(true), "notifications": map[string]any{"taskIds": []any{a1, b1, "forged", 7, a2}}}
	if wide {
		for i := range 20 { // more members than the splice edits
			listen[fmt.Sprintf("x%d", i)] = i
		}
	}
	r = rpc(t, px.URL, "alice", "subscriptions/listen", listen, nil)
	if up.count() != n+1 {
		t.Fatalf("the listen request did not reach the upstream once")
	}
	got := up.last().listened
	if len(got) != 5 || got[0] != up1 || got[1] != "" || got[2] != "" || got[3] != "" || got[4] == "" || got[4] == a2 {
		t.Fatalf("the upstream was asked about %q; want alice's two tasks by its own ids and \"\" for the rest", got)
	}
	var acked []string
	var reported []string
	for _, ev := range events(r.raw) {
		var m struct {
			Method string
			Params struct {
				TaskID        string
				Notifications struct{ TaskIDs []string }
			}
		}
		json.Unmarshal(ev, &m)
		switch m.Method {
		case "notifications/subscriptions/acknowledged":
			acked = m.Params.Notifications.TaskIDs
		case "notifications/tasks":
			reported = append(reported, m.Params.TaskID)
		}
	}
	if len(acked) != 2 || acked[0] != a1 || acked[1] != a2 {
		t.Fatalf("acknowledged %q, want alice's ids %q, %q", acked, a1, a2)
	}
	if len(reported) != 2 || !(reported[0] == a1 && reported[1] == a2 || reported[0] == a2 && reported[1] == a1) {
		t.Fatalf("notifications named %q, want alice's two tasks only", reported)
	}
	for _, id := range got {
		if id != "" && bytes.Contains(r.raw, []byte(id)) {
			t.Fatalf("an upstream task id reached the caller: %s", r.raw)
		}
	}
	if bytes.Contains(r.raw, []byte(b1)) {
		t.Fatalf("bob's task reached alice's stream: %s", r.raw)
	}
}

// TestTaskIDOnOtherMethods: a CreateTaskResult answering a method the
// proxy does not otherwise read (the extension may add more) is sealed to
// the caller too, and its id works like a tools/call's.
func TestTaskIDOnOtherMethods(t *testing.T) {
	up := newTaskUpstream(t, false)
	px := taskProxy(t, up.url(), nil, nil)
	r := rpc(t, px.URL, "alice", "jobs/start", map[string]any{"_meta": tasksMeta(true)}, nil)
	var id string
	json.Unmarshal(r.result["taskId"], &id)
	if r.resultType() != "task" || !strings.HasPrefix(id, "t1.k1.") || bytes.Contains(r.raw, []byte(up.only(t))) {
		t.Fatalf("jobs/start: want a sealed task id, got %s", r.raw)
	}
	if r := taskCall(t, px.URL, "alice", task.MethodGet, id, true); r.err != nil {
		t.Fatalf("tasks/get: %s", r.raw)
	}
	wantUnknownTask(t, taskCall(t, px.URL, "bob", task.MethodGet, id, true))
}

// TestTaskRequestReencoded: params of more than 16 members, which the
// proxy cannot splice, are encoded again with the upstream's id.
func TestTaskRequestReencoded(t *testing.T) {
	up, px, id := aliceTask(t, false)
	p := map[string]any{"taskId": id, "_meta": tasksMeta(true)}
	for i := range 20 {
		p[fmt.Sprintf("x%d", i)] = i
	}
	r := rpc(t, px.URL, "alice", task.MethodGet, p, http.Header{"Mcp-Name": {id}})
	var got string
	if r.err != nil || json.Unmarshal(r.result["taskId"], &got) != nil || got != id {
		t.Fatalf("tasks/get with 22 params: %s", r.raw)
	}
	if s := up.last(); s.taskID != up.only(t) {
		t.Fatalf("the upstream got taskId %q", s.taskID)
	}
}

// TestTaskIDUnsplicedAnswers: answers the proxy cannot edit in place (a
// result of more than 16 members, a repeated member name) are encoded
// again with the caller's id, or refused; no upstream id gets through.
func TestTaskIDUnsplicedAnswers(t *testing.T) {
	const upID = "upstream-task-1"
	wide := map[string]any{"taskId": upID, "status": "working", "createdAt": "2026-12-01T00:00:00Z", "lastUpdatedAt": "2026-12-01T00:00:00Z", "ttlMs": 60000}
	for i := range 16 {
		wide[fmt.Sprintf("x%d", i)] = i
	}
	var dupGet atomic.Bool
	up := newScripted(t, func(w http.ResponseWriter, m rpcMsg) {
		switch {
		case m.Method == "tools/call":
			r := maps.Clone(wide)
			r["resultType"] = "task"
			writeResult(w, m.ID, r)
		case dupGet.Load():
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","taskId":%q,"status":"working","taskId":"another"}}`, m.ID, upID)
		default:
			r := maps.Clone(wide)
			r["resultType"] = "complete"
			writeResult(w, m.ID, r)
		}
	})
	px := taskProxy(t, up.url(), nil, nil)
	id := create(t, px.URL, "alice")
	if !strings.HasPrefix(id, "t1.") {
		t.Fatalf("a wide CreateTaskResult: task id %q, want a sealed one", id)
	}
	r := taskCall(t, px.URL, "alice", task.MethodGet, id, true)
	var got string
	if r.err != nil || json.Unmarshal(r.result["taskId"], &got) != nil || got != id || len(r.result) != 22 {
		t.Fatalf("a wide tasks/get answer: want all 22 members and taskId %q, got %s", id, r.raw)
	}
	dupGet.Store(true)
	r = taskCall(t, px.URL, "alice", task.MethodGet, id, true)
	if r.err == nil || r.err.Code != -32603 || bytes.Contains(r.raw, []byte(upID)) {
		t.Fatalf("an answer naming taskId twice: want -32603 and no upstream id, got %s", r.raw)
	}
}

// rejections records what a TaskObserver hears of refusals.
type rejections struct {
	task.NopObserver
	mu  sync.Mutex
	got []task.RejectEvent
}

func (o *rejections) TaskRejected(_ context.Context, e task.RejectEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, e)
}

// TestTaskRefusalsObserved: each tasks/* request the proxy refuses itself
// reaches Options.TaskObserver (issue 38 item 6) with its reason, method,
// caller and protocol version, and never the id it named: another
// caller's id is unknown_task, an undeclared request missing_extension;
// the owner's own request is the upstream's to report, not a refusal.
func TestTaskRefusalsObserved(t *testing.T) {
	up := newTaskUpstream(t, false)
	obs := &rejections{}
	px := startProxy(t, up.url(), nil, nil, &proxy.Options{Principal: byHeader, TaskObserver: obs})
	id := create(t, px.URL, "alice")
	taskCall(t, px.URL, "alice", task.MethodGet, id, true)
	wantUnknownTask(t, taskCall(t, px.URL, "bob", task.MethodUpdate, id, true))
	taskCall(t, px.URL, "bob", task.MethodCancel, id, false)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	want := []struct {
		method string
		reason task.Reason
	}{{task.MethodUpdate, task.ReasonUnknownTask}, {task.MethodCancel, task.ReasonMissingExtension}}
	if len(obs.got) != len(want) {
		t.Fatalf("observed %d refusals, want %d: %+v", len(obs.got), len(want), obs.got)
	}
	for i, w := range want {
		e := obs.got[i]
		if e.Method != w.method || e.Reason != w.reason || e.Principal.Subject != "bob" || e.ProtocolVersion != "2026-07-28" {
			t.Errorf("refusal %d: %s %s by %q (%q), want %s %s by bob (2026-07-28)", i, e.Method, e.Reason, e.Principal.Subject, e.ProtocolVersion, w.method, w.reason)
		}
		if e.TaskID != "" || e.RequestID != "9" {
			t.Errorf("refusal %d names task %q, request %q: want no task, request 9", i, e.TaskID, e.RequestID)
		}
	}
}
