package redisstore_test

import (
	"context"
	"errors"
	"log"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/replay/redisstore"
)

// Replicas behind a load balancer share one Redis, so a token used on one
// replica is refused on every other. The examples need a server, so they are
// compiled but not run; the tests run the same calls against a real one.
func Example() {
	store, err := redisstore.NewFromURL("redis://localhost:6379/0", &redisstore.Options{
		Timeout: time.Second, // each round trip, retries included
	})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	ctx := context.Background()
	if err := store.Ping(ctx); err != nil {
		log.Printf("redis is not answering yet: %v", err) // requests fail closed until it does
	}

	// What a guard does with each token it resumes.
	resume := func(ctx context.Context, jti string, expires time.Time, handler func(context.Context) error) int {
		res, err := store.Reserve(ctx, jti, expires)
		switch {
		case errors.Is(err, replay.ErrReplayed):
			return http.StatusConflict // the token was used
		case err != nil:
			return http.StatusServiceUnavailable // Redis could not decide: fail closed
		}
		done, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if err := handler(ctx); err != nil {
			_ = res.Release(done) // the user may retry with the same token
			return http.StatusInternalServerError
		}
		if err := res.Commit(done); err != nil && !errors.Is(err, replay.ErrReplayed) {
			log.Printf("commit: %v", err) // the id stays claimed until it expires: still safe to answer
		}
		return http.StatusOK
	}

	status := resume(ctx, "Zm9vYmFyYmF6cXV4cXV1eA", time.Now().Add(5*time.Minute), func(context.Context) error {
		return nil
	})
	log.Println(status)
}

// New takes a client the application configured, here for Redis Cluster:
// every operation touches one key, so ids spread over all shards.
func ExampleNew() {
	client := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{"redis-0:6379", "redis-1:6379", "redis-2:6379"},
		ContextTimeoutEnabled: true,
	})
	defer client.Close()

	store := redisstore.New(client, &redisstore.Options{Prefix: "myapp:replay:"})
	_ = store // a replay.Store, ready for a guard
}

// Sentinel and Cluster deployments are named by URL too. With Replicas, a
// claim counts only once that many replicas hold it, so that a failover
// does not forget it. Compiled, not run: it needs the servers.
func ExampleNewFromURL_failover() {
	sentinel, err := redisstore.NewFromURL(
		"redis://sentinel1:26379?master_name=mymaster&addr=sentinel2:26379&addr=sentinel3:26379",
		&redisstore.Options{Replicas: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer sentinel.Close()

	cluster, err := redisstore.NewFromURL("rediss-cluster://node1:7000?addr=node2:7001&addr=node3:7002",
		&redisstore.Options{Replicas: 1, Timeout: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()

	d, err := cluster.Durability(context.Background())
	if err == nil && !d.AOF && d.Replicas == 0 {
		log.Print("a Redis restart would forget used tokens")
	}
}
