// Package redistask is a [task.Store] kept in Redis, for several server
// replicas that serve the same tasks: a task created on one is read,
// answered and cancelled on any other, and the replica running it collects
// answers delivered to the others.
//
//	rs, err := redisstore.NewFromURL("redis://redis.internal:6379/0", &redisstore.Options{Replicas: 1})
//	if err != nil {
//		return err
//	}
//	tasks := task.NewManager(redistask.New(rs, nil), nil)
//
// It goes through a [redisstore.Store], the replay store of the same
// deployment: the same client (one server, Sentinel or Cluster, from the
// same URL forms), the same Timeout, and the same acknowledgement rules
// (Options.Replicas: WAIT or WAITAOF on the write's own connection).
//
// # Keys
//
// A task is one hash, under the replay store's prefix followed by "task:"
// and the base64url SHA-256 of its whole key (server, issuer, subject and
// id, each length-prefixed). A lookup computes that name from the
// request's own server, principal and id, so another caller's lookup of the
// same id names another key: there is no index by id alone. Redis expires
// the hash at the task's creation time plus its TTL (PEXPIREAT), whatever
// its status.
//
// Fields: st (status), msg, cr and up (creation and last update, Unix
// milliseconds), ttl and poll (milliseconds), res and err (the final result
// or JSON-RPC error), own and lease (the running node's token and the end of
// its lease, Unix milliseconds), n (the count of outstanding requests), and
// per input request key K: k:K (asked once; never removed), r:K (the request,
// while outstanding) and a:K (the answer, from tasks/update until the running
// node collects it).
//
// # Operations
//
// Every operation is one Lua script on the task's one key, so it is atomic
// and runs on the key's primary in a Cluster. Create, Answer and Finish go
// through [redisstore.Store.Write]: with Replicas above zero they return
// only once that many replicas acknowledged them, so a CreateTaskResult
// leaves only for a task a failover keeps, and an answer that was taken is
// not taken a second time after one (the retry of an unacknowledged answer
// finds its key either still outstanding, when the failover lost the first,
// or answered, when it did not). A Get that finds the lease lapsed writes the
// task failed in the same script; Touch, Ask and Collect are not
// acknowledged (a lost Touch or Ask is repeated or refused by the next).
package redistask
