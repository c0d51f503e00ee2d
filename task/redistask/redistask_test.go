package redistask_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/testing/testredis"
	"github.com/mrtr-go/mrtr/replay/redisstore"
	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
	"github.com/mrtr-go/mrtr/task/redistask"
	"github.com/mrtr-go/mrtr/task/tasktest"
)

// newReplicas returns two stores, each with its own client (two replicas)
// of one Redis.
func newReplicas(t *testing.T, url string, opts *redisstore.Options) (task.Store, task.Store) {
	t.Helper()
	var out [2]task.Store
	for i := range out {
		rs, err := redisstore.NewFromURL(url, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rs.Close() })
		out[i] = redistask.New(rs, nil)
	}
	return out[0], out[1]
}

func TestContract(t *testing.T) {
	url := testredis.Start(t)
	tasktest.Run(t, func(t *testing.T) (task.Store, task.Store) { return newReplicas(t, url, nil) })
}

// TestContractReplicated runs the suite with writes that count only once
// a replica acknowledged them (WAIT). The bound on each operation is a
// loaded test machine's, not the 250 ms default: what the suite checks is
// the outcome of acknowledged writes, never how fast they were.
func TestContractReplicated(t *testing.T) {
	rs := testredis.StartReplicated(t, 1)
	tasktest.Run(t, func(t *testing.T) (task.Store, task.Store) {
		return newReplicas(t, rs.Primary.URL(), &redisstore.Options{Replicas: 1, Timeout: 10 * time.Second})
	})
}

// TestContractCluster runs the suite on a Redis Cluster: every operation
// is one script on one key, so tasks spread over the slots.
func TestContractCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	cl := testredis.StartCluster(t, 3, 0)
	tasktest.Run(t, func(t *testing.T) (task.Store, task.Store) { return newReplicas(t, cl.URL(), nil) })
}

// TestFailoverKeepsAnswersTaken: on Sentinel with Replicas 1, a task and
// an answer acknowledged before the primary dies are there after the
// failover: the task is found, the answered key is not taken a second
// time, and the other key still is.
func TestFailoverKeepsAnswersTaken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sentinel set")
	}
	ss := testredis.StartSentinel(t, 2, 3)
	a, b := newReplicas(t, ss.URL(), &redisstore.Options{Replicas: 1, Timeout: 5 * time.Second})
	ctx := context.Background()
	now := time.Now()
	k := task.Key{Server: "srv", Principal: reqstate.Principal{Subject: "alice"}, ID: "failover"}
	if err := a.Create(ctx, k, &task.Record{Status: task.Working, Created: now, Updated: now, TTL: time.Hour,
		Owner: "owner", LeaseUntil: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	req := json.RawMessage(`{"method":"elicitation/create","params":{"message":"?"}}`)
	if err := a.Ask(ctx, k, "owner", map[string]json.RawMessage{"x": req, "y": req}, now); err != nil {
		t.Fatal(err)
	}
	ans := json.RawMessage(`{"action":"accept"}`)
	if taken, err := b.Answer(ctx, k, map[string]json.RawMessage{"x": ans}, now); err != nil || len(taken) != 1 {
		t.Fatalf("Answer before the failover = %v, %v", taken, err)
	}
	old, err := ss.MasterAddr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ss.ServerAt(old).Kill()
	ss.WaitFailover(t, old, 1)
	var taken []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		taken, err = b.Answer(ctx, k, map[string]json.RawMessage{"x": ans, "y": ans}, time.Now())
		if err == nil || time.Now().After(deadline) {
			break // the clients follow the new primary after a few refusals
		}
	}
	if err != nil || len(taken) != 1 || taken[0] != "y" {
		t.Fatalf("Answer after the failover = %v, %v, want only y taken (x was before)", taken, err)
	}
	r, err := a.Get(ctx, k, time.Now())
	if err != nil || r.Status != task.Working || len(r.Requests) != 0 {
		t.Fatalf("after the failover: %+v, %v", r, err)
	}
}
