package testredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Topologies: a primary with replicas, the same watched by Sentinel, and a
// Redis Cluster, all on 127.0.0.1, each process stopped by its id when the
// test ends. The helpers wait for explicit signs of readiness (INFO
// replication, SENTINEL commands, CLUSTER INFO), never for a fixed time.

// readyTimeout bounds each wait for a topology to become ready or to fail
// over.
const readyTimeout = 60 * time.Second

// StartServerArgs is [StartServer] with extra redis-server arguments, which
// follow (and so override) the defaults, at every start of the server.
func StartServerArgs(t testing.TB, args ...string) *Server {
	t.Helper()
	return startServerWith(t, func(s *Server) { s.extra = func() []string { return args } })
}

func startServerWith(t testing.TB, configure func(*Server)) *Server {
	t.Helper()
	bin, err := lookPath()
	if err != nil {
		unavailable(t, err)
		return nil
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir()}
	if configure != nil {
		configure(s)
	}
	if err := s.startFresh(); err != nil {
		t.Fatalf("testredis: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// PID returns the server's process id, 0 while it is stopped.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Running reports whether the server's process runs.
func (s *Server) Running() bool { return s.PID() != 0 }

// Kill kills the server with SIGKILL, as a crash would, and waits for the
// process to exit. Killing a stopped server does nothing.
func (s *Server) Kill() {
	s.t.Helper()
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		s.t.Fatalf("testredis: redis-server (pid %d) did not exit after SIGKILL", p.cmd.Process.Pid)
	}
}

// client returns a go-redis client of the server, closed when the test
// ends.
func (s *Server) client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: time.Second,
		ReadTimeout: 2 * time.Second, ContextTimeoutEnabled: true})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Info returns the fields of INFO section from the server at addr.
func Info(ctx context.Context, addr, section string) (map[string]string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
	defer c.Close()
	text, err := c.Info(ctx, section).Result()
	if err != nil {
		return nil, err
	}
	return parseInfo(text), nil
}

func parseInfo(text string) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(text) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

// waitFor polls cond until it returns nil or readyTimeout passes, and fails
// t with cond's last error then.
func waitFor(t testing.TB, what string, cond func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	var last error
	start, logged := time.Now(), time.Now()
	for {
		cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
		last = cond(cctx)
		ccancel()
		if last == nil {
			return
		}
		if time.Since(logged) > 5*time.Second {
			t.Logf("testredis: %s: still waiting after %v: %v", what, time.Since(start).Round(time.Second), last)
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testredis: %s: not ready within %v: %v", what, readyTimeout, last)
			return
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// ReplicaSet is a primary and its replicas.
type ReplicaSet struct {
	Primary  *Server
	Replicas []*Server
}

// StartReplicated starts a primary and n replicas of it, each with the
// extra redis-server arguments args, and waits until every replica is in
// sync (master_link_status:up, and the primary lists it online).
func StartReplicated(t testing.TB, n int, args ...string) *ReplicaSet {
	t.Helper()
	args = append(fastSync(), args...)
	rs := &ReplicaSet{Primary: StartServerArgs(t, args...)}
	for range n {
		rargs := append(append([]string{}, args...), "--replicaof", "127.0.0.1", strconv.Itoa(rs.Primary.port))
		rs.Replicas = append(rs.Replicas, StartServerArgs(t, rargs...))
	}
	WaitReplicas(t, rs.Primary.Addr(), n)
	return rs
}

// fastSync are the arguments that make a replica's full resynchronization
// start at once: the primary does not wait five seconds for more replicas
// to share the transfer with.
func fastSync() []string { return []string{"--repl-diskless-sync-delay", "0"} }

// WaitReplicas waits until the primary at addr has n replicas online and
// each of them reports its link up.
func WaitReplicas(t testing.TB, addr string, n int) {
	t.Helper()
	waitFor(t, "replicas of "+addr, func(ctx context.Context) error {
		info, err := Info(ctx, addr, "replication")
		if err != nil {
			return err
		}
		if info["role"] != "master" {
			return fmt.Errorf("role %s", info["role"])
		}
		online := 0
		for i := range 16 {
			v, ok := info["slave"+strconv.Itoa(i)]
			if !ok {
				break
			}
			if !strings.Contains(v, "state=online") {
				continue
			}
			f := parseFields(v)
			ri, err := Info(ctx, net.JoinHostPort(f["ip"], f["port"]), "replication")
			if err != nil || ri["master_link_status"] != "up" {
				continue
			}
			online++
		}
		if online < n {
			return fmt.Errorf("%d of %d replicas online", online, n)
		}
		return nil
	})
}

// parseFields splits "ip=127.0.0.1,port=1234,state=online".
func parseFields(s string) map[string]string {
	m := map[string]string{}
	for kv := range strings.SplitSeq(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// SentinelMaster is the name the sentinels of [StartSentinel] monitor the
// primary under.
const SentinelMaster = "mrtr"

// SentinelSet is a primary with replicas watched by sentinels.
type SentinelSet struct {
	*ReplicaSet
	Sentinels []*Server
}

// StartSentinel starts a primary, replicas replicas and sentinels sentinels
// (quorum: a majority) that consider the primary down after one second
// without an answer, and waits until every sentinel knows the primary, the
// replicas and the other sentinels, and SENTINEL CKQUORUM passes. args go to
// the data servers. The sentinel binary is redis-sentinel, or redis-server
// --sentinel where only that is installed.
func StartSentinel(t testing.TB, replicas, sentinels int, args ...string) *SentinelSet {
	t.Helper()
	return startSentinel(t, replicas, sentinels, 0, args...)
}

// StartSentinelLagged is [StartSentinel] with every replica fed through a
// [LagLink] of lag: the primary's writes reach its replicas lag late, and
// those of the last lag are lost when the primary is killed, as across a
// slow network from a host that crashes. (The sentinels leave the replicas
// on those links for 20 s, their failover-timeout, after which they would
// point the replicas at the primary directly: long enough for a short test.)
func StartSentinelLagged(t testing.TB, replicas, sentinels int, lag time.Duration, args ...string) *SentinelSet {
	t.Helper()
	return startSentinel(t, replicas, sentinels, lag, args...)
}

func startSentinel(t testing.TB, replicas, sentinels int, lag time.Duration, args ...string) *SentinelSet {
	t.Helper()
	var rs *ReplicaSet
	failoverTimeout := 10000
	if lag <= 0 {
		rs = StartReplicated(t, replicas, args...)
	} else {
		failoverTimeout = 20000
		args = append(fastSync(), args...)
		rs = &ReplicaSet{Primary: StartServerArgs(t, args...)}
		for range replicas {
			link := StartLagLink(t, rs.Primary.Addr(), lag)
			rargs := append(append([]string{}, args...), "--replicaof", "127.0.0.1", strconv.Itoa(link.Port()))
			rs.Replicas = append(rs.Replicas, StartServerArgs(t, rargs...))
		}
		WaitReplicas(t, rs.Primary.Addr(), replicas)
	}
	ss := &SentinelSet{ReplicaSet: rs}
	bin, sentinelFlag, err := sentinelPath()
	if err != nil {
		Unsupported(t, "%v", err)
		return nil
	}
	quorum := sentinels/2 + 1
	for range sentinels {
		ss.Sentinels = append(ss.Sentinels, startServerWith(t, func(s *Server) {
			s.bin, s.sentinel = bin, true
			s.conf = filepath.Join(s.dir, "sentinel.conf")
			conf := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d\n"+
				"sentinel down-after-milliseconds %s 1000\n"+
				"sentinel failover-timeout %s %d\n"+
				"sentinel parallel-syncs %s %d\n",
				SentinelMaster, ss.Primary.port, quorum, SentinelMaster, SentinelMaster, failoverTimeout, SentinelMaster, max(1, replicas))
			if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
				t.Fatal(err)
			}
			if sentinelFlag {
				s.extra = func() []string { return []string{"--sentinel"} }
			}
		}))
	}
	for _, s := range ss.Sentinels {
		c := s.client()
		waitFor(t, "sentinel "+s.Addr(), func(ctx context.Context) error {
			if err := c.Do(ctx, "SENTINEL", "CKQUORUM", SentinelMaster).Err(); err != nil {
				return err
			}
			known, err := c.Do(ctx, "SENTINEL", "REPLICAS", SentinelMaster).Slice()
			if err != nil {
				return err
			}
			if len(known) != replicas {
				return fmt.Errorf("knows %d of %d replicas", len(known), replicas)
			}
			others, err := c.Do(ctx, "SENTINEL", "SENTINELS", SentinelMaster).Slice()
			if err != nil {
				return err
			}
			if len(others) != sentinels-1 {
				return fmt.Errorf("knows %d of %d other sentinels", len(others), sentinels-1)
			}
			return nil
		})
	}
	return ss
}

// sentinelPath finds redis-sentinel, or redis-server (run with --sentinel).
func sentinelPath() (bin string, flag bool, err error) {
	if bin, err := exec.LookPath("redis-sentinel"); err == nil {
		return bin, false, nil
	}
	bin, err = lookPath()
	if err != nil {
		return "", false, fmt.Errorf("redis-sentinel not found: %w", err)
	}
	return bin, true, nil
}

// URL returns the Sentinel URL of the set, go-redis's failover form:
// redis://S1?master_name=mrtr&addr=S2&addr=S3.
func (ss *SentinelSet) URL() string {
	u := "redis://" + ss.Sentinels[0].Addr() + "/0?master_name=" + SentinelMaster
	for _, s := range ss.Sentinels[1:] {
		u += "&addr=" + s.Addr()
	}
	return u
}

// MasterAddr asks the sentinels, in turn, for the primary's address.
func (ss *SentinelSet) MasterAddr(ctx context.Context) (string, error) {
	var errs []error
	for _, s := range ss.Sentinels {
		if !s.Running() {
			continue
		}
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
		v, err := c.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster).StringSlice()
		_ = c.Close()
		if err == nil && len(v) == 2 {
			return net.JoinHostPort(v[0], v[1]), nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("no sentinel named the primary: %w", errors.Join(errs...))
}

// Servers returns the primary and the replicas as started (roles change in
// a failover).
func (ss *SentinelSet) Servers() []*Server {
	return append([]*Server{ss.Primary}, ss.Replicas...)
}

// ServerAt returns the data server listening on addr, or nil.
func (ss *SentinelSet) ServerAt(addr string) *Server {
	for _, s := range ss.Servers() {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// WaitFailover waits until a majority of the sentinels names a primary
// other than old, and no running sentinel names a third one, that primary
// says it is one (role:master), and it has replicas online replicas. It
// returns the new primary. (A sentinel in the minority can lag behind the
// others' new configuration for a while; clients ask the next sentinel when
// the primary one names does not answer.)
func (ss *SentinelSet) WaitFailover(t testing.TB, old string, replicas int) *Server {
	t.Helper()
	var now string
	waitFor(t, "failover from "+old, func(ctx context.Context) error {
		now = ""
		agree, stale := 0, []string{}
		for _, s := range ss.Sentinels {
			if !s.Running() {
				continue
			}
			c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
			v, err := c.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster).StringSlice()
			_ = c.Close()
			if err != nil || len(v) != 2 {
				stale = append(stale, fmt.Sprintf("sentinel %s: %v %v", s.Addr(), v, err))
				continue
			}
			addr := net.JoinHostPort(v[0], v[1])
			if addr == old {
				stale = append(stale, fmt.Sprintf("sentinel %s still names %s", s.Addr(), old))
				continue
			}
			if now != "" && now != addr {
				return fmt.Errorf("sentinels disagree: %s and %s", now, addr)
			}
			now = addr
			agree++
		}
		if agree < len(ss.Sentinels)/2+1 {
			return fmt.Errorf("%d of %d sentinels name a new primary: %s", agree, len(ss.Sentinels), strings.Join(stale, "; "))
		}
		info, err := Info(ctx, now, "replication")
		if err != nil {
			return err
		}
		if info["role"] != "master" {
			return fmt.Errorf("%s has role %s", now, info["role"])
		}
		return nil
	})
	WaitReplicas(t, now, replicas)
	return ss.ServerAt(now)
}

// WaitAgreement waits until every running sentinel names one primary
// other than old. After WaitFailover a sentinel in the minority may still
// name the old primary for a moment, and a client that asks it dials a
// dead server: for a client the failover is over only once all agree.
func (ss *SentinelSet) WaitAgreement(t testing.TB, old string) {
	t.Helper()
	waitFor(t, "every sentinel naming one new primary", func(ctx context.Context) error {
		named := ""
		for _, s := range ss.Sentinels {
			if !s.Running() {
				continue
			}
			c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
			v, err := c.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster).StringSlice()
			_ = c.Close()
			if err != nil || len(v) != 2 {
				return fmt.Errorf("sentinel %s: %v %v", s.Addr(), v, err)
			}
			addr := net.JoinHostPort(v[0], v[1])
			if addr == old || named != "" && addr != named {
				return fmt.Errorf("sentinel %s names %s", s.Addr(), addr)
			}
			named = addr
		}
		return nil
	})
}

// Cluster is a Redis Cluster on 127.0.0.1.
type Cluster struct {
	Nodes []*Server
}

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// StartCluster starts primaries*(1+replicas) cluster-enabled servers (node
// timeout one second), joins them with redis-cli --cluster create
// --cluster-replicas replicas, and waits until every node reports
// cluster_state:ok with every slot served and every replica in sync. args go
// to every node.
func StartCluster(t testing.TB, primaries, replicas int, args ...string) *Cluster {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		Unsupported(t, "redis-cli not found: %v", err)
		return nil
	}
	c := &Cluster{}
	for range primaries * (1 + replicas) {
		bus, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		c.Nodes = append(c.Nodes, startServerWith(t, func(s *Server) {
			nargs := append([]string{
				"--cluster-enabled", "yes",
				"--cluster-port", strconv.Itoa(bus),
				"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
				"--cluster-node-timeout", "1000",
			}, append(fastSync(), args...)...)
			// A restarted node keeps nodes.conf: it rejoins the cluster
			// as the node it was, and as a replica if a failover gave its
			// slots to another (with no data: nothing is persisted).
			s.extra = func() []string { return nargs }
		}))
	}
	create := []string{"--cluster", "create"}
	for _, n := range c.Nodes {
		create = append(create, n.Addr())
	}
	create = append(create, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, create...)
	if stdbuf, err := exec.LookPath("stdbuf"); err == nil {
		// Line-buffered, so that a hang shows how far it got.
		cmd = exec.CommandContext(ctx, stdbuf, append([]string{"-oL", cli}, create...)...)
	}
	out := new(lockedWriter)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		var logs strings.Builder
		for _, n := range c.Nodes {
			fmt.Fprintf(&logs, "--- %s:\n%s\n", n.Addr(), readTail(filepath.Join(n.dir, "redis.log"), 1500))
		}
		t.Fatalf("testredis: redis-cli %s: %v\n%s\n%s", strings.Join(create, " "), err, out.String(), logs.String())
	}
	c.WaitOK(t)
	return c
}

// URL returns the cluster's URL: redis-cluster://N1?addr=N2&addr=... .
func (c *Cluster) URL() string {
	u := "redis-cluster://" + c.Nodes[0].Addr()
	for i, n := range c.Nodes[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + n.Addr()
	}
	return u
}

// Primaries returns the running nodes whose role is master.
func (c *Cluster) Primaries(t testing.TB) []*Server {
	t.Helper()
	var out []*Server
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		info, err := Info(context.Background(), n.Addr(), "replication")
		if err != nil {
			t.Fatalf("testredis: INFO replication of %s: %v", n.Addr(), err)
		}
		if info["role"] == "master" {
			out = append(out, n)
		}
	}
	return out
}

// WaitOK waits until every running node reports cluster_state:ok, all
// slots assigned and served, and no known node that is running flagged as
// failing; and until every running replica's link to its primary is up.
// After a primary was killed, it waits for a replica to have taken its
// slots over.
func (c *Cluster) WaitOK(t testing.TB) {
	t.Helper()
	running := 0
	for _, n := range c.Nodes {
		if n.Running() {
			running++
		}
	}
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		waitFor(t, "cluster node "+n.Addr(), func(ctx context.Context) error {
			info, err := clusterInfo(ctx, n.Addr())
			if err != nil {
				return err
			}
			if info["cluster_state"] != "ok" || info["cluster_slots_ok"] != strconv.Itoa(clusterSlots) {
				return fmt.Errorf("cluster_state %s, cluster_slots_ok %s", info["cluster_state"], info["cluster_slots_ok"])
			}
			if info["cluster_known_nodes"] != strconv.Itoa(len(c.Nodes)) {
				return fmt.Errorf("knows %s of %d nodes", info["cluster_known_nodes"], len(c.Nodes))
			}
			repl, err := Info(ctx, n.Addr(), "replication")
			if err != nil {
				return err
			}
			if repl["role"] == "slave" && repl["master_link_status"] != "up" {
				return fmt.Errorf("replica link %s", repl["master_link_status"])
			}
			return c.noFailFlags(ctx, n.Addr())
		})
	}
}

// noFailFlags checks that the node at addr sees every running node without
// fail or pfail flags, and every killed one as failed.
func (c *Cluster) noFailFlags(ctx context.Context, addr string) error {
	cl := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer cl.Close()
	nodes, err := cl.ClusterNodes(ctx).Result()
	if err != nil {
		return err
	}
	for line := range strings.Lines(nodes) {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		host := f[1]
		if i := strings.IndexByte(host, '@'); i >= 0 {
			host = host[:i]
		}
		failing := strings.Contains(f[2], "fail")
		for _, n := range c.Nodes {
			if n.Addr() != host {
				continue
			}
			if n.Running() && failing {
				return fmt.Errorf("%s flags %s %s", addr, host, f[2])
			}
			if !n.Running() && !strings.Contains(f[2], "fail") {
				return fmt.Errorf("%s does not yet flag the killed %s as failed (%s)", addr, host, f[2])
			}
		}
	}
	return nil
}

func clusterInfo(ctx context.Context, addr string) (map[string]string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
	defer c.Close()
	text, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return nil, err
	}
	return parseInfo(text), nil
}

// PIDs returns the process ids of the running nodes.
func (c *Cluster) PIDs() []int {
	var pids []int
	for _, n := range c.Nodes {
		if pid := n.PID(); pid != 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// PIDs returns the process ids of the running data servers and sentinels.
func (ss *SentinelSet) PIDs() []int {
	var pids []int
	for _, s := range append(ss.Servers(), ss.Sentinels...) {
		if pid := s.PID(); pid != 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}
