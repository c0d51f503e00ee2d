package task_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/task"
	"github.com/mrtr-go/mrtr/task/tasktest"
)

func TestMemoryContract(t *testing.T) {
	tasktest.Run(t, func(t *testing.T) (task.Store, task.Store) {
		s := task.NewMemory(nil)
		return s, s
	})
}

func TestMemoryBounded(t *testing.T) {
	s := task.NewMemory(&task.MemoryOptions{MaxTasks: 2})
	now := time.Now()
	rec := func(ttl time.Duration) *task.Record {
		return &task.Record{Status: task.Working, Created: now, Updated: now, TTL: ttl, LeaseUntil: now.Add(time.Minute)}
	}
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		if err := s.Create(ctx, task.Key{ID: id}, rec(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Create(ctx, task.Key{ID: "c"}, rec(time.Second)); !errors.Is(err, task.ErrFull) {
		t.Fatalf("a third task: %v, want ErrFull", err)
	}
	// Once the first two expired, there is room again.
	later := rec(time.Second)
	later.Created = now.Add(2 * time.Second)
	if err := s.Create(ctx, task.Key{ID: "c"}, later); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if s.Len() != 1 {
		t.Errorf("Len = %d, want the expired ones swept", s.Len())
	}
}
