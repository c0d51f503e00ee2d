package redistask_test

import (
	"testing"

	"github.com/mrtr-go/mrtr/internal/testing/testredis"
	"github.com/mrtr-go/mrtr/replay/redisstore"
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
// a replica acknowledged them (WAIT).
func TestContractReplicated(t *testing.T) {
	rs := testredis.StartReplicated(t, 1)
	tasktest.Run(t, func(t *testing.T) (task.Store, task.Store) {
		return newReplicas(t, rs.Primary.URL(), &redisstore.Options{Replicas: 1})
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
