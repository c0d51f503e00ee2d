package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Write sends the commands queue adds, all about key, within the store's
// Timeout, under the same acknowledgement rules as a claim: with
// Options.Replicas above zero they go to key's primary followed by WAIT
// (or WAITAOF) in one pipeline, and Write fails unless that many replicas
// acknowledged them. Each command keeps its own result and error, which
// the caller reads; Write's error is about the round trip and the
// acknowledgement only.
//
// Other stores sharing a deployment with the replay store (package
// task/redistask) write through it, so that one setting decides what a
// write that counts means, for every kind of state.
func (s *Store) Write(ctx context.Context, key string, queue func(redis.Pipeliner)) error {
	_, err := roundTrip(ctx, s, func(ctx context.Context) (struct{}, error) {
		if s.replicas == 0 {
			p := s.client.Pipeline()
			queue(p)
			_, err := p.Exec(ctx)
			if err != nil && !isCommandError(err) {
				return struct{}{}, err
			}
			return struct{}{}, nil
		}
		acks, err := s.pipelineAcked(ctx, key, queue)
		if err != nil {
			return struct{}{}, err
		}
		if acks < s.replicas {
			return struct{}{}, s.ackShort(acks)
		}
		return struct{}{}, nil
	})
	return err
}

// Call runs op against the store's client within the store's Timeout, as
// the store's own calls do, for reads and writes that need no
// acknowledgement.
func (s *Store) Call(ctx context.Context, op func(ctx context.Context, c redis.UniversalClient) error) error {
	_, err := roundTrip(ctx, s, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, op(ctx, s.client)
	})
	return err
}

// isCommandError reports whether err is a reply of Redis to one command (a
// script's error, redis.Nil), which the command carries, rather than a
// failure of the connection.
func isCommandError(err error) bool {
	if err == redis.Nil {
		return true
	}
	_, ok := err.(redis.Error)
	return ok
}
