//go:build unix

package redisstore_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mrtr-go/mrtr/internal/testing/testredis"
	"github.com/mrtr-go/mrtr/replay/redisstore"
)

// BenchmarkResumeCPU is the CPU this process (the store and go-redis, not
// redis-server) spends on the store's share of one resume, Reserve then
// Commit, with 16 resumes in flight as under a proxy's load: reported as
// cpu-ns/op (user + system time of the process, from getrusage), beside
// the wall time ns/op that waiting on Redis dominates. URL is the client
// NewFromURL makes (ContextTimeoutEnabled); Client is a caller's client
// without it. The numbers of docs/BENCHMARKS.md come from
//
//	go test ./replay/redisstore -run '^$' -bench ResumeCPU -benchtime 20000x -count 5
func BenchmarkResumeCPU(b *testing.B) {
	url := testredis.Start(b)
	for _, tc := range []struct {
		name  string
		store func(b *testing.B) *redisstore.Store
	}{
		{"URL", func(b *testing.B) *redisstore.Store {
			s, err := redisstore.NewFromURL(url, &redisstore.Options{Prefix: newPrefix(), Timeout: 2 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		}},
		{"Client", func(b *testing.B) *redisstore.Store {
			o, err := redis.ParseURL(url)
			if err != nil {
				b.Fatal(err)
			}
			c := redis.NewClient(o)
			b.Cleanup(func() { _ = c.Close() })
			return redisstore.New(c, &redisstore.Options{Prefix: newPrefix(), Timeout: 2 * time.Second})
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			store := tc.store(b)
			ctx := context.Background()
			exp := time.Now().Add(time.Hour)
			resume := func() {
				r, err := store.Reserve(ctx, newID(), exp)
				if err == nil {
					err = r.Commit(ctx)
				}
				if err != nil {
					b.Error(err)
				}
			}
			for range 20 { // connections, the script cache
				resume()
			}
			b.SetParallelism(8) // 16 goroutines on 2 cores
			b.ReportAllocs()
			c0 := processCPU(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resume()
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(processCPU(b)-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the user + system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
