package testredis

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// A write on the primary reaches both replicas; killing the primary makes
// the sentinels promote a replica that holds it.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	ss := StartSentinel(t, 2, 3)
	ctx := t.Context()
	addr, err := ss.MasterAddr(ctx)
	if err != nil || addr != ss.Primary.Addr() {
		t.Fatalf("MasterAddr = %q, %v; want %s", addr, err, ss.Primary.Addr())
	}
	var addrs []string
	for _, s := range ss.Sentinels {
		addrs = append(addrs, s.Addr())
	}
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: SentinelMaster, SentinelAddrs: addrs})
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Wait(ctx, 2, 0).Result(); err != nil || n != 2 {
		t.Fatalf("WAIT 2 = %d, %v", n, err)
	}
	ss.Primary.Kill()
	promoted := ss.WaitFailover(t, addr, 1)
	if promoted == nil || promoted == ss.Primary {
		t.Fatalf("promoted %v", promoted)
	}
	if v := c.Get(ctx, "k").Val(); v != "v" {
		t.Fatalf("GET after failover = %q", v)
	}
	t.Logf("sentinel URL %s; promoted %s", ss.URL(), promoted.Addr())
}

// A three-primary cluster with a replica each serves every slot, and
// serves them again after a primary is killed.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	cl := StartCluster(t, 3, 1)
	if n := len(cl.Primaries(t)); n != 3 {
		t.Fatalf("%d primaries, want 3", n)
	}
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{cl.Nodes[0].Addr()}})
	defer c.Close()
	for _, k := range []string{"a", "b", "c", "d"} {
		if err := c.Set(ctx, k, k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Primaries(t)[0].Kill()
	cl.WaitOK(t)
	if n := len(cl.Primaries(t)); n != 3 {
		t.Fatalf("%d primaries after failover, want 3", n)
	}
	if err := c.Set(ctx, "e", "e", 0).Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster URL %s", cl.URL())
}
