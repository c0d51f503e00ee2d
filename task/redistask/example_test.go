package redistask_test

import (
	"log"

	"github.com/mrtr-go/mrtr/replay/redisstore"
	"github.com/mrtr-go/mrtr/task"
	"github.com/mrtr-go/mrtr/task/redistask"
)

// Replicas behind a load balancer keep their tasks in the Redis their
// replay store uses, so any replica serves any task. The example needs a
// server, so it is compiled but not run; the tests run the same calls
// against a real one.
func Example() {
	// A Sentinel deployment; a create, an answer and an end count once
	// one replica acknowledged them.
	rs, err := redisstore.NewFromURL("redis://sentinel-1:26379?master_name=mrtr&addr=sentinel-2:26379", &redisstore.Options{Replicas: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer rs.Close()
	tasks := task.NewManager(redistask.New(rs, nil), &task.Options{Server: "billing"})
	_ = tasks // gosdk.Options{Tasks: tasks}
}
