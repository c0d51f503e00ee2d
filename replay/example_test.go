package replay_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mrtr-go/mrtr/replay"
)

// A guard resumes a token by reserving its id, running the handler, then
// committing on success or releasing on failure.
func Example() {
	store := replay.NewMemory(nil)
	ctx := context.Background()
	const jti = "Zm9vYmFyYmF6cXV4cXV1eA" // the token's random id
	expires := time.Now().Add(5 * time.Minute)

	resume := func(handler func() error) error {
		res, err := store.Reserve(ctx, jti, expires)
		if err != nil {
			return err // ErrReplayed rejects the token; any other error fails closed
		}
		if err := handler(); err != nil {
			return errors.Join(err, res.Release(ctx))
		}
		return res.Commit(ctx)
	}

	fmt.Println(resume(func() error { return errors.New("backend unavailable") }))
	fmt.Println(resume(func() error { return nil }))
	err := resume(func() error { return nil })
	fmt.Println(err, errors.Is(err, replay.ErrReplayed))
	// Output:
	// backend unavailable
	// <nil>
	// replay: token already used true
}

// A reservation that is never committed or released, because the process
// handling it crashed or lost its Commit, keeps the token claimed until it
// expires: a lost Commit never lets the token run its handler again.
func ExampleNewMemory() {
	now := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	store := replay.NewMemory(&replay.MemoryOptions{
		Now: func() time.Time { return now },
	})
	ctx := context.Background()
	expires := now.Add(5 * time.Minute)

	_, err := store.Reserve(ctx, "Zm9vYmFyYmF6cXV4cXV1eA", expires)
	fmt.Println("first resume:", err)
	// The first resume's process crashes before Commit.
	now = now.Add(4 * time.Minute)
	_, err = store.Reserve(ctx, "Zm9vYmFyYmF6cXV4cXV1eA", expires)
	fmt.Println("retry 4 minutes later:", err)
	now = expires
	_, err = store.Reserve(ctx, "Zm9vYmFyYmF6cXV4cXV1eA", expires)
	fmt.Println("retry at the expiry:", err)
	// Output:
	// first resume: <nil>
	// retry 4 minutes later: replay: token already used
	// retry at the expiry: replay: token already used
}
