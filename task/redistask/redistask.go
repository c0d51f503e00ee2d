package redistask

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mrtr-go/mrtr/replay/redisstore"
	"github.com/mrtr-go/mrtr/task"
)

// Options configures a Store. The zero value is ready to use.
type Options struct {
	// Prefix starts every task's key. Empty means the replay store's
	// prefix followed by "task:", so that ACL key patterns written for the
	// replay store cover the tasks too.
	Prefix string
}

// Store is a task.Store in Redis. It is safe for concurrent use, and any
// number of processes may share one.
type Store struct {
	rs     *redisstore.Store
	prefix string
}

var _ task.Store = (*Store)(nil)

// New returns a Store that keeps tasks through rs's client, under rs's
// timeout and acknowledgement rules. A nil rs panics; opts may be nil.
func New(rs *redisstore.Store, opts *Options) *Store {
	if rs == nil {
		panic("redistask: New needs a redisstore.Store")
	}
	s := &Store{rs: rs, prefix: rs.Prefix() + "task:"}
	if opts != nil && opts.Prefix != "" {
		s.prefix = opts.Prefix
	}
	return s
}

// Name returns the Redis key of the task under k.
func (s *Store) Name(k task.Key) string {
	h := sha256.New()
	for _, f := range []string{k.Server, k.Principal.Issuer, k.Principal.Subject, k.ID} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return s.prefix + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// The scripts share endTask: a terminal status, its result or error, and
// no outstanding request or waiting answer left.
const lib = `
local function terminal(st) return st == 'completed' or st == 'cancelled' or st == 'failed' end
local function endTask(key, st, now)
  local fields = redis.call('HKEYS', key)
  for _, f in ipairs(fields) do
    local p = string.sub(f, 1, 2)
    if p == 'r:' or p == 'a:' then redis.call('HDEL', key, f) end
  end
  redis.call('HSET', key, 'st', st, 'up', now, 'n', 0)
end
`

var (
	createScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('HGET', KEYS[1], 'own') == ARGV[2] then return 1 end
  return 0
end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
return 1`)

	getScript = redis.NewScript(lib + `
local st = redis.call('HGET', KEYS[1], 'st')
if not st then return false end
if not terminal(st) and tonumber(redis.call('HGET', KEYS[1], 'lease')) < tonumber(ARGV[1]) then
  endTask(KEYS[1], 'failed', ARGV[1])
  redis.call('HSET', KEYS[1], 'err', ARGV[2], 'msg', ARGV[3])
end
return redis.call('HGETALL', KEYS[1])`)

	touchScript = redis.NewScript(lib + `
local st = redis.call('HGET', KEYS[1], 'st')
if not st then return 'nf' end
if terminal(st) then return st end
if redis.call('HGET', KEYS[1], 'own') ~= ARGV[1] then return 'no' end
redis.call('HSET', KEYS[1], 'lease', ARGV[3])
if ARGV[4] == '1' then redis.call('HSET', KEYS[1], 'msg', ARGV[5], 'up', ARGV[2]) end
return st`)

	askScript = redis.NewScript(lib + `
local st = redis.call('HGET', KEYS[1], 'st')
if not st then return 'nf' end
if terminal(st) or redis.call('HGET', KEYS[1], 'own') ~= ARGV[1] then return 'no' end
for i = 3, #ARGV, 2 do
  if redis.call('HEXISTS', KEYS[1], 'k:' .. ARGV[i]) == 1 then return 'reused' end
end
local count = 0
for i = 3, #ARGV, 2 do
  redis.call('HSET', KEYS[1], 'r:' .. ARGV[i], ARGV[i+1], 'k:' .. ARGV[i], '1')
  count = count + 1
end
local n = redis.call('HINCRBY', KEYS[1], 'n', count)
if n > 0 then redis.call('HSET', KEYS[1], 'st', 'input_required') end
redis.call('HSET', KEYS[1], 'up', ARGV[2])
return 'ok'`)

	answerScript = redis.NewScript(lib + `
local st = redis.call('HGET', KEYS[1], 'st')
if not st then return {'nf'} end
local taken = {'ok'}
if terminal(st) then return taken end
for i = 2, #ARGV, 2 do
  if redis.call('HDEL', KEYS[1], 'r:' .. ARGV[i]) == 1 then
    redis.call('HSET', KEYS[1], 'a:' .. ARGV[i], ARGV[i+1])
    table.insert(taken, ARGV[i])
  end
end
if #taken > 1 then
  local n = redis.call('HINCRBY', KEYS[1], 'n', 1 - #taken)
  redis.call('HSET', KEYS[1], 'up', ARGV[1])
  if n <= 0 and st == 'input_required' then redis.call('HSET', KEYS[1], 'st', 'working') end
end
return taken`)

	collectScript = redis.NewScript(`
local own = redis.call('HGET', KEYS[1], 'own')
if not own then return {'nf'} end
if own ~= ARGV[1] then return {'no'} end
local out = {'ok'}
for i = 2, #ARGV do
  local f = 'a:' .. ARGV[i]
  local v = redis.call('HGET', KEYS[1], f)
  if v then
    redis.call('HDEL', KEYS[1], f)
    table.insert(out, ARGV[i])
    table.insert(out, v)
  end
end
return out`)

	finishScript = redis.NewScript(lib + `
local st = redis.call('HGET', KEYS[1], 'st')
if not st then return -1 end
if terminal(st) then return 0 end
if ARGV[1] ~= '' and redis.call('HGET', KEYS[1], 'own') ~= ARGV[1] then return 0 end
endTask(KEYS[1], ARGV[3], ARGV[2])
if ARGV[4] == '1' then redis.call('HSET', KEYS[1], 'msg', ARGV[5]) end
if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'res', ARGV[6]) end
if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'err', ARGV[7]) end
return 1`)
)

// Create implements task.Store.
func (s *Store) Create(ctx context.Context, k task.Key, r *task.Record) error {
	name := s.Name(k)
	args := []any{ms(r.Created.Add(r.TTL)), r.Owner,
		"st", string(r.Status), "msg", r.Message, "cr", ms(r.Created), "up", ms(r.Updated),
		"ttl", r.TTL.Milliseconds(), "poll", r.PollInterval.Milliseconds(),
		"own", r.Owner, "lease", ms(r.LeaseUntil), "n", len(r.Requests)}
	for key, req := range r.Requests {
		args = append(args, "r:"+key, string(req), "k:"+key, "1")
	}
	var cmd *redis.Cmd
	err := s.rs.Write(ctx, name, func(p redis.Pipeliner) {
		cmd = createScript.Eval(ctx, p, []string{name}, args...)
	})
	if err != nil {
		return fmt.Errorf("redistask: create: %w", err)
	}
	n, err := cmd.Int64()
	if err != nil {
		return fmt.Errorf("redistask: create: %w", err)
	}
	if n == 0 {
		return task.ErrExists
	}
	return nil
}

// run runs script on k's key within the store's timeout.
func (s *Store) run(ctx context.Context, script *redis.Script, k task.Key, args ...any) (any, error) {
	var v any
	err := s.rs.Call(ctx, func(ctx context.Context, c redis.UniversalClient) error {
		var err error
		v, err = script.Run(ctx, c, []string{s.Name(k)}, args...).Result()
		return err
	})
	return v, err
}

// Get implements task.Store.
func (s *Store) Get(ctx context.Context, k task.Key, now time.Time) (*task.Record, error) {
	v, err := s.run(ctx, getScript, k, ms(now), string(task.LapsedError), task.LapsedMessage)
	if errors.Is(err, redis.Nil) {
		return nil, task.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("redistask: get: %w", err)
	}
	list, _ := v.([]any)
	return parse(list)
}

func parse(list []any) (*task.Record, error) {
	r := &task.Record{}
	num := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	for i := 0; i+1 < len(list); i += 2 {
		f, _ := list[i].(string)
		v, _ := list[i+1].(string)
		switch {
		case f == "st":
			r.Status = task.Status(v)
		case f == "msg":
			r.Message = v
		case f == "cr":
			r.Created = time.UnixMilli(num(v))
		case f == "up":
			r.Updated = time.UnixMilli(num(v))
		case f == "ttl":
			r.TTL = time.Duration(num(v)) * time.Millisecond
		case f == "poll":
			r.PollInterval = time.Duration(num(v)) * time.Millisecond
		case f == "res":
			r.Result = json.RawMessage(v)
		case f == "err":
			r.Error = json.RawMessage(v)
		case f == "own":
			r.Owner = v
		case f == "lease":
			r.LeaseUntil = time.UnixMilli(num(v))
		case strings.HasPrefix(f, "r:"):
			if r.Requests == nil {
				r.Requests = map[string]json.RawMessage{}
			}
			r.Requests[f[2:]] = json.RawMessage(v)
		}
	}
	if r.Status == "" {
		return nil, task.ErrNotFound
	}
	return r, nil
}

// Touch implements task.Store.
func (s *Store) Touch(ctx context.Context, k task.Key, owner string, t task.Touch) (task.Status, error) {
	has, msg := "0", ""
	if t.Message != nil {
		has, msg = "1", *t.Message
	}
	v, err := s.run(ctx, touchScript, k, owner, ms(t.Now), ms(t.LeaseUntil), has, msg)
	if err != nil {
		return "", fmt.Errorf("redistask: touch: %w", err)
	}
	switch st, _ := v.(string); st {
	case "nf":
		return "", task.ErrNotFound
	case "no":
		return "", task.ErrNotOwner
	default:
		return task.Status(st), nil
	}
}

// Ask implements task.Store.
func (s *Store) Ask(ctx context.Context, k task.Key, owner string, reqs map[string]json.RawMessage, now time.Time) error {
	args := []any{owner, ms(now)}
	for key, req := range reqs {
		args = append(args, key, string(req))
	}
	v, err := s.run(ctx, askScript, k, args...)
	if err != nil {
		return fmt.Errorf("redistask: ask: %w", err)
	}
	switch st, _ := v.(string); st {
	case "ok":
		return nil
	case "nf":
		return task.ErrNotFound
	case "reused":
		return task.ErrKeyReused
	default:
		return task.ErrNotOwner
	}
}

// Answer implements task.Store.
func (s *Store) Answer(ctx context.Context, k task.Key, answers map[string]json.RawMessage, now time.Time) ([]string, error) {
	name := s.Name(k)
	args := []any{ms(now)}
	for key, a := range answers {
		args = append(args, key, string(a))
	}
	var cmd *redis.Cmd
	err := s.rs.Write(ctx, name, func(p redis.Pipeliner) {
		cmd = answerScript.Eval(ctx, p, []string{name}, args...)
	})
	if err != nil {
		return nil, fmt.Errorf("redistask: answer: %w", err)
	}
	list, err := cmd.StringSlice()
	if err != nil {
		return nil, fmt.Errorf("redistask: answer: %w", err)
	}
	if len(list) == 0 || list[0] == "nf" {
		return nil, task.ErrNotFound
	}
	return list[1:], nil
}

// Collect implements task.Store.
func (s *Store) Collect(ctx context.Context, k task.Key, owner string, keys []string) (map[string]json.RawMessage, error) {
	args := []any{owner}
	for _, key := range keys {
		args = append(args, key)
	}
	v, err := s.run(ctx, collectScript, k, args...)
	if err != nil {
		return nil, fmt.Errorf("redistask: collect: %w", err)
	}
	list, _ := v.([]any)
	if len(list) == 0 {
		return nil, task.ErrNotFound
	}
	switch list[0] {
	case "nf":
		return nil, task.ErrNotFound
	case "no":
		return nil, task.ErrNotOwner
	}
	out := map[string]json.RawMessage{}
	for i := 1; i+1 < len(list); i += 2 {
		key, _ := list[i].(string)
		a, _ := list[i+1].(string)
		out[key] = json.RawMessage(a)
	}
	return out, nil
}

// Finish implements task.Store.
func (s *Store) Finish(ctx context.Context, k task.Key, owner string, e task.End) (bool, error) {
	name := s.Name(k)
	has, msg := "0", ""
	if e.Message != nil {
		has, msg = "1", *e.Message
	}
	var cmd *redis.Cmd
	err := s.rs.Write(ctx, name, func(p redis.Pipeliner) {
		cmd = finishScript.Eval(ctx, p, []string{name}, owner, ms(e.Now), string(e.Status), has, msg, string(e.Result), string(e.Error))
	})
	if err != nil {
		return false, fmt.Errorf("redistask: finish: %w", err)
	}
	n, err := cmd.Int64()
	if err != nil {
		return false, fmt.Errorf("redistask: finish: %w", err)
	}
	if n < 0 {
		return false, task.ErrNotFound
	}
	return n == 1, nil
}
