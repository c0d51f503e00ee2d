package e2e

import (
	"runtime"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/testing/testredis"
)

// TestLoadTopologies runs the load of TestLoad (guess_number flows, each
// round on the next node) on every single-use store setup, one after the
// other in one run, and prints them side by side: the in-memory store on
// one node, and two nodes on one Redis, on Sentinel (one primary, two
// replicas, three sentinels) with --replay-replicas 0 and 1, and on a
// Cluster (three primaries with a replica each) with 0 and 1. The Redis CPU
// column adds up every redis-server and sentinel process of the setup.
// The numbers of docs/OPERATIONS.md come from
//
//	go test ./e2e -run TestLoadTopologies -count=1 -v -load.duration 10s
func TestLoadTopologies(t *testing.T) {
	if *loadDuration <= 0 || *loadClients <= 0 {
		t.Fatalf("-load.duration %v and -load.clients %d must be positive", *loadDuration, *loadClients)
	}
	keys := mnKeyRing(t, "k1")
	// Generous store timeouts, as TestLoad's under -race: this test
	// measures throughput, and on two busy cores a replica's
	// acknowledgment can wait for a CPU longer than the default 500ms.
	common := []string{"--keys", keys, "--replay-timeout", "5s"}
	type setup struct {
		name     string
		replay   func(t *testing.T) (url string, pids func() []int)
		replicas string
		nodes    int
	}
	oneRedis := func(t *testing.T) (string, func() []int) {
		s := testredis.StartServer(t)
		return s.URL(), func() []int { return []int{s.PID()} }
	}
	sentinel := func(t *testing.T) (string, func() []int) {
		ss := testredis.StartSentinel(t, 2, 3)
		return ss.URL(), ss.PIDs
	}
	cluster := func(t *testing.T) (string, func() []int) {
		cl := testredis.StartCluster(t, 3, 1)
		return cl.URL(), cl.PIDs
	}
	setups := []setup{
		{name: "1 node, in-memory store", nodes: 1},
		{name: "2 nodes, one Redis", replay: oneRedis, replicas: "0", nodes: 2},
		{name: "2 nodes, Sentinel, 0 replica acks", replay: sentinel, replicas: "0", nodes: 2},
		{name: "2 nodes, Sentinel, 1 replica ack", replay: sentinel, replicas: "1", nodes: 2},
		{name: "2 nodes, Cluster, 0 replica acks", replay: cluster, replicas: "0", nodes: 2},
		{name: "2 nodes, Cluster, 1 replica ack", replay: cluster, replicas: "1", nodes: 2},
	}
	var results []loadResult
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			args := append([]string{"--server-id", mnServerID, "--replay", "memory"}, common...)
			pids := func() []int { return nil }
			if s.replay != nil {
				var url string
				url, pids = s.replay(t)
				args = append(mnClusterArgs(url, common...), "--replay-replicas", s.replicas)
			}
			var nodes []*mnNode
			for i := range s.nodes {
				nodes = append(nodes, mnStartNode(t, "AB"[i:i+1], nil, args...))
			}
			before, err := loadRedisCPU(pids())
			r := loadRun(t, s.name, nodes, 0)
			after, err2 := loadRedisCPU(pids())
			if err == nil {
				err = err2
			}
			r.cpuRedis = after - before
			if r.cpuErr == nil {
				r.cpuErr = err
			}
			results = append(results, r)
		})
	}
	race := ""
	if raceEnabled() {
		race = ", -race (numbers not comparable)"
	}
	t.Logf("%d clients, %v per setup, guess_number max %d, GOMAXPROCS %d%s", *loadClients, *loadDuration, loadMax, runtime.GOMAXPROCS(0), race)
	t.Logf("| setup | flows | rounds | flows/s | rounds/s | p50 round | p99 round | p50 round 1 | p99 round 1 | p50 resume | p99 resume |")
	t.Logf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range results {
		t.Logf("%s", r.row())
	}
	t.Logf("CPU time used during each setup's run (user + system; the client is this test process; Redis is every redis-server and sentinel of the setup):")
	t.Logf("| setup | client | mrtr nodes | Redis | nodes per round | Redis per round |")
	t.Logf("| --- | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range results {
		if r.cpuErr != nil {
			t.Logf("| %s | no CPU times: %v |", r.name, r.cpuErr)
			continue
		}
		t.Logf("%s", r.cpuRow())
	}
}

// loadRedisCPU adds up the CPU time the processes pids have used so far.
func loadRedisCPU(pids []int) (total time.Duration, err error) {
	for _, pid := range pids {
		d, err := loadCPU(pid)
		if err != nil {
			return 0, err
		}
		total += d
	}
	return total, nil
}
