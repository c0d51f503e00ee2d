// Package tasktest is the contract suite every task.Store must pass.
//
//	func TestContract(t *testing.T) {
//		tasktest.Run(t, func(t *testing.T) (task.Store, task.Store) {
//			s := task.NewMemory(nil)
//			return s, s
//		})
//	}
//
// The function returns two stores over the same tasks: two handles on one
// memory store, or two clients (two replicas) of one Redis. The suite
// writes through one and reads through the other wherever that matters.
// Times are the real clock's, since a store may keep time on its server.
package tasktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
)

// Run runs the contract suite against the stores newStores returns.
func Run(t *testing.T, newStores func(t *testing.T) (a, b task.Store)) {
	for _, c := range []struct {
		name string
		f    func(t *testing.T, a, b task.Store)
	}{
		{"CreateIsVisibleEverywhere", createVisible},
		{"KeyIsWhole", keyIsWhole},
		{"Expires", expires},
		{"LapsedLeaseFails", lapsedLease},
		{"TerminalOnlyOnce", terminalOnce},
		{"AskAndAnswer", askAndAnswer},
		{"AnswerTakenOnce", answerTakenOnce},
		{"KeysNeverReused", keysNeverReused},
		{"OwnerOnly", ownerOnly},
		{"CancelWhileAsking", cancelWhileAsking},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := newStores(t)
			c.f(t, a, b)
		})
	}
}

var alice = reqstate.Principal{Issuer: "https://issuer.example", Subject: "alice"}

var n atomic.Int64

func newKey(p reqstate.Principal) task.Key {
	return task.Key{Server: "srv", Principal: p, ID: fmt.Sprintf("task-%d-%d", time.Now().UnixNano(), n.Add(1))}
}

func newRecord(owner string, ttl time.Duration) *task.Record {
	now := time.Now()
	return &task.Record{Status: task.Working, Message: "starting", Created: now, Updated: now, TTL: ttl,
		PollInterval: 100 * time.Millisecond, Owner: owner, LeaseUntil: now.Add(time.Minute)}
}

func mustCreate(t *testing.T, s task.Store, k task.Key, r *task.Record) {
	t.Helper()
	if err := s.Create(context.Background(), k, r); err != nil {
		t.Fatalf("Create: %v", err)
	}
}

func mustGet(t *testing.T, s task.Store, k task.Key) *task.Record {
	t.Helper()
	r, err := s.Get(context.Background(), k, time.Now())
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return r
}

func elicit(msg string) json.RawMessage {
	return json.RawMessage(`{"method":"elicitation/create","params":{"mode":"form","message":"` + msg +
		`","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}`)
}

var accept = json.RawMessage(`{"action":"accept","content":{"ok":true}}`)

func createVisible(t *testing.T, a, b task.Store) {
	ctx := context.Background()
	k := newKey(alice)
	r := newRecord("owner", time.Minute)
	mustCreate(t, a, k, r)
	got := mustGet(t, b, k)
	if got.Status != task.Working || got.Message != "starting" || got.Owner != "owner" || got.TTL != time.Minute ||
		got.PollInterval != 100*time.Millisecond || !got.Created.Equal(r.Created.Truncate(time.Millisecond)) && !got.Created.Equal(r.Created) {
		t.Errorf("Get after Create = %+v, want what was created (%+v)", got, r)
	}
	if err := b.Create(ctx, k, newRecord("other", time.Minute)); !errors.Is(err, task.ErrExists) {
		t.Errorf("second Create under one key: %v, want ErrExists", err)
	}
	if got := mustGet(t, a, k); got.Owner != "owner" {
		t.Errorf("a refused Create changed the task: owner %q", got.Owner)
	}
}

func keyIsWhole(t *testing.T, a, b task.Store) {
	ctx := context.Background()
	k := newKey(alice)
	mustCreate(t, a, k, newRecord("owner", time.Minute))
	others := map[string]task.Key{
		"another principal":        {Server: k.Server, Principal: reqstate.Principal{Issuer: alice.Issuer, Subject: "mallory"}, ID: k.ID},
		"another issuer":           {Server: k.Server, Principal: reqstate.Principal{Issuer: "https://evil.example", Subject: "alice"}, ID: k.ID},
		"anonymous":                {Server: k.Server, ID: k.ID},
		"another server":           {Server: "other", Principal: alice, ID: k.ID},
		"another id":               {Server: k.Server, Principal: alice, ID: k.ID + "x"},
		"fields shifted":           {Server: k.Server + alice.Issuer, Principal: reqstate.Principal{Subject: alice.Subject}, ID: k.ID},
		"issuer and subject moved": {Server: k.Server, Principal: reqstate.Principal{Issuer: alice.Issuer + "alice"}, ID: k.ID},
	}
	for name, o := range others {
		for _, s := range []task.Store{a, b} {
			if _, err := s.Get(ctx, o, time.Now()); !errors.Is(err, task.ErrNotFound) {
				t.Errorf("%s: Get = %v, want ErrNotFound", name, err)
			}
			if _, err := s.Answer(ctx, o, map[string]json.RawMessage{"k": accept}, time.Now()); !errors.Is(err, task.ErrNotFound) {
				t.Errorf("%s: Answer = %v, want ErrNotFound", name, err)
			}
			if ok, err := s.Finish(ctx, o, "", task.End{Now: time.Now(), Status: task.Cancelled}); ok || !errors.Is(err, task.ErrNotFound) {
				t.Errorf("%s: Finish = %v, %v, want false, ErrNotFound", name, ok, err)
			}
		}
	}
	if got := mustGet(t, b, k); got.Status != task.Working {
		t.Errorf("the owner's task is %s after the others' requests", got.Status)
	}
}

func expires(t *testing.T, a, b task.Store) {
	k := newKey(alice)
	mustCreate(t, a, k, newRecord("owner", 300*time.Millisecond))
	mustGet(t, b, k)
	time.Sleep(450 * time.Millisecond)
	if _, err := b.Get(context.Background(), k, time.Now()); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("Get after the TTL: %v, want ErrNotFound", err)
	}
	// The key is free again (a fresh id would be used, but a store must
	// not keep what it forgot).
	mustCreate(t, a, k, newRecord("owner2", time.Minute))
}

func lapsedLease(t *testing.T, a, b task.Store) {
	ctx := context.Background()
	k := newKey(alice)
	r := newRecord("owner", time.Minute)
	r.LeaseUntil = time.Now().Add(200 * time.Millisecond)
	mustCreate(t, a, k, r)
	if got := mustGet(t, b, k); got.Status != task.Working {
		t.Fatalf("status within the lease: %s", got.Status)
	}
	later := time.Now().Add(time.Second)
	got, err := b.Get(ctx, k, later)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != task.Failed || !jsonEqual(got.Error, task.LapsedError) || got.Message != task.LapsedMessage {
		t.Fatalf("after the lease: status %s error %s, want failed with %s", got.Status, got.Error, task.LapsedError)
	}
	// The owner comes back too late: it cannot finish or renew.
	if ok, err := a.Finish(ctx, k, "owner", task.End{Now: later, Status: task.Completed, Result: json.RawMessage(`{"content":[]}`)}); ok || err != nil {
		t.Errorf("Finish after the lapse = %v, %v, want false, nil", ok, err)
	}
	if st, err := a.Touch(ctx, k, "owner", task.Touch{Now: later, LeaseUntil: later.Add(time.Minute)}); st != task.Failed || err != nil {
		t.Errorf("Touch after the lapse = %s, %v, want failed, nil", st, err)
	}
	if got := mustGet(t, a, k); got.Status != task.Failed || len(got.Result) != 0 {
		t.Errorf("the lapsed task changed: %+v", got)
	}
}

func terminalOnce(t *testing.T, a, b task.Store) {
	ctx := context.Background()
	k := newKey(alice)
	mustCreate(t, a, k, newRecord("owner", time.Minute))
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, end := a, task.End{Now: time.Now(), Status: task.Completed, Result: json.RawMessage(fmt.Sprintf(`{"content":[],"n":%d}`, i))}
			owner := "owner"
			if i%2 == 1 {
				s, end, owner = b, task.End{Now: time.Now(), Status: task.Cancelled}, ""
			}
			ok, err := s.Finish(ctx, k, owner, end)
			if err != nil {
				t.Error(err)
			}
			if ok {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d Finishes changed the task, want exactly 1", wins.Load())
	}
	got := mustGet(t, b, k)
	if !got.Status.Terminal() {
		t.Fatalf("status %s", got.Status)
	}
	if got.Status == task.Completed && len(got.Result) == 0 {
		t.Errorf("completed without its result")
	}
	if got.Status == task.Cancelled && len(got.Result) != 0 {
		t.Errorf("cancelled with a result %s", got.Result)
	}
}

func askAndAnswer(t *testing.T, a, b task.Store) {
	ctx := context.Background()
	k := newKey(alice)
	mustCreate(t, a, k, newRecord("owner", time.Minute))
	reqs := map[string]json.RawMessage{"one": elicit("first"), "two": elicit("second")}
	if err := a.Ask(ctx, k, "owner", reqs, time.Now()); err != nil {
		t.Fatal(err)
	}
	got := mustGet(t, b, k)
	if got.Status != task.InputRequired || len(got.Requests) != 2 || !jsonEqual(got.Requests["one"], reqs["one"]) {
		t.Fatalf("after Ask: %s %v", got.Status, got.Requests)
	}
	// A partial answer, with keys never asked beside it.
	taken, err := b.Answer(ctx, k, map[string]json.RawMessage{"one": accept, "never": accept}, time.Now())
	if err != nil || !slices.Equal(taken, []string{"one"}) {
		t.Fatalf("Answer = %v, %v, want [one]", taken, err)
	}
	got = mustGet(t, a, k)
	if got.Status != task.InputRequired || len(got.Requests) != 1 || got.Requests["two"] == nil {
		t.Fatalf("after a partial answer: %s %v, want input_required with two left", got.Status, keys(got.Requests))
	}
	if taken, _ := b.Answer(ctx, k, map[string]json.RawMessage{"two": accept}, time.Now()); !slices.Equal(taken, []string{"two"}) {
		t.Fatalf("second Answer took %v", taken)
	}
	got = mustGet(t, a, k)
	if got.Status != task.Working || len(got.Requests) != 0 {
		t.Fatalf("after every answer: %s %v, want working with none outstanding", got.Status, keys(got.Requests))
	}
	// The owner collects each answer once, on any node.
	col, err := a.Collect(ctx, k, "owner", []string{"one", "two", "never"})
	if err != nil || len(col) != 2 || !jsonEqual(col["one"], accept) {
		t.Fatalf("Collect = %v, %v", col, err)
	}
	if col, _ := b.Collect(ctx, k, "owner", []string{"one", "two"}); len(col) != 0 {
		t.Errorf("a second Collect returned %v", keys(col))
	}
	if _, err := b.Collect(ctx, k, "intruder", []string{"one"}); !errors.Is(err, task.ErrNotOwner) {
		t.Errorf("Collect by another owner: %v, want ErrNotOwner", err)
	}
}

func answerTakenOnce(t *testing.T, a, b task.Store) {
	ctx := context.Background()
	k := newKey(alice)
	mustCreate(t, a, k, newRecord("owner", time.Minute))
	reqs := map[string]json.RawMessage{}
	for i := range 8 {
		reqs[fmt.Sprint("k", i)] = elicit(fmt.Sprint(i))
	}
	if err := a.Ask(ctx, k, "owner", reqs, time.Now()); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	takenBy := map[string]int{}
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := a
			if i%2 == 1 {
				s = b
			}
			ans := map[string]json.RawMessage{}
			for key := range reqs {
				ans[key] = json.RawMessage(fmt.Sprintf(`{"action":"accept","content":{"by":%d}}`, i))
			}
			taken, err := s.Answer(ctx, k, ans, time.Now())
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			for _, key := range taken {
				takenBy[key]++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	for key := range reqs {
		if takenBy[key] != 1 {
			t.Errorf("key %s taken %d times, want once", key, takenBy[key])
		}
	}
	col, err := b.Collect(ctx, k, "owner", keys(reqs))
	if err != nil || len(col) != len(reqs) {
		t.Fatalf("Collect: %d answers, %v", len(col), err)
	}
}

func keysNeverReused(t *testing.T, a, b task.Store) {
	ctx := context.Background()
	k := newKey(alice)
	mustCreate(t, a, k, newRecord("owner", time.Minute))
	if err := a.Ask(ctx, k, "owner", map[string]json.RawMessage{"q": elicit("q")}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := b.Ask(ctx, k, "owner", map[string]json.RawMessage{"q": elicit("again")}, time.Now()); !errors.Is(err, task.ErrKeyReused) {
		t.Errorf("Ask of an outstanding key: %v, want ErrKeyReused", err)
	}
	if _, err := b.Answer(ctx, k, map[string]json.RawMessage{"q": accept}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := a.Ask(ctx, k, "owner", map[string]json.RawMessage{"r": elicit("r"), "q": elicit("again")}, time.Now()); !errors.Is(err, task.ErrKeyReused) {
		t.Errorf("Ask of an answered key: %v, want ErrKeyReused", err)
	}
	if got := mustGet(t, b, k); got.Status != task.Working || len(got.Requests) != 0 {
		t.Errorf("a refused Ask changed the task: %s %v", got.Status, keys(got.Requests))
	}
	// An answer to the answered key is ignored.
	if taken, _ := a.Answer(ctx, k, map[string]json.RawMessage{"q": accept}, time.Now()); len(taken) != 0 {
		t.Errorf("an answered key was taken again: %v", taken)
	}
}

func ownerOnly(t *testing.T, a, b task.Store) {
	ctx := context.Background()
	k := newKey(alice)
	mustCreate(t, a, k, newRecord("owner", time.Minute))
	now := time.Now()
	if _, err := b.Touch(ctx, k, "intruder", task.Touch{Now: now, LeaseUntil: now.Add(time.Hour)}); !errors.Is(err, task.ErrNotOwner) {
		t.Errorf("Touch by another owner: %v", err)
	}
	if err := b.Ask(ctx, k, "intruder", map[string]json.RawMessage{"x": elicit("x")}, now); !errors.Is(err, task.ErrNotOwner) {
		t.Errorf("Ask by another owner: %v", err)
	}
	if ok, err := b.Finish(ctx, k, "intruder", task.End{Now: now, Status: task.Completed, Result: json.RawMessage(`{}`)}); ok || err != nil {
		t.Errorf("Finish by another owner = %v, %v", ok, err)
	}
	msg := "half way"
	if st, err := b.Touch(ctx, k, "owner", task.Touch{Now: now, LeaseUntil: now.Add(time.Hour), Message: &msg}); st != task.Working || err != nil {
		t.Fatalf("Touch by the owner = %s, %v", st, err)
	}
	got := mustGet(t, a, k)
	if got.Message != "half way" || got.LeaseUntil.Before(now.Add(59*time.Minute)) {
		t.Errorf("after Touch: message %q lease %v", got.Message, got.LeaseUntil)
	}
}

func cancelWhileAsking(t *testing.T, a, b task.Store) {
	ctx := context.Background()
	k := newKey(alice)
	mustCreate(t, a, k, newRecord("owner", time.Minute))
	if err := a.Ask(ctx, k, "owner", map[string]json.RawMessage{"q": elicit("q")}, time.Now()); err != nil {
		t.Fatal(err)
	}
	msg := "cancelled"
	if ok, err := b.Finish(ctx, k, "", task.End{Now: time.Now(), Status: task.Cancelled, Message: &msg}); !ok || err != nil {
		t.Fatalf("cancel = %v, %v", ok, err)
	}
	got := mustGet(t, a, k)
	if got.Status != task.Cancelled || len(got.Requests) != 0 || got.Message != "cancelled" {
		t.Fatalf("after cancel: %+v", got)
	}
	if taken, err := b.Answer(ctx, k, map[string]json.RawMessage{"q": accept}, time.Now()); len(taken) != 0 || err != nil {
		t.Errorf("Answer to a cancelled task = %v, %v", taken, err)
	}
	now := time.Now()
	if st, err := a.Touch(ctx, k, "owner", task.Touch{Now: now, LeaseUntil: now.Add(time.Minute)}); st != task.Cancelled || err != nil {
		t.Errorf("the owner's Touch = %s, %v, want cancelled", st, err)
	}
	if ok, _ := a.Finish(ctx, k, "owner", task.End{Now: now, Status: task.Completed, Result: json.RawMessage(`{}`)}); ok {
		t.Errorf("the owner completed a cancelled task")
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
