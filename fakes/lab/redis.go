package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisBinary is the Redis server the lab runs (Debian's is Redis 7.0);
// started with --sentinel it is a Sentinel.
var RedisBinary = "/usr/bin/redis-server"

// RedisMasterName is the name the Sentinels of a RedisSentinel lab
// monitor their primary under.
const RedisMasterName = "lab"

// Redis's ports on every member's own address, and the Sentinels' timing:
// a primary silent for 1 s is down, and a failover that stalls is tried
// again after twice the failover timeout.
const (
	redisPort         = 6379
	sentinelPort      = 26379
	sentinelDownAfter = time.Second
	sentinelFailover  = 2 * time.Second
)

// The members of a RedisSentinel lab: redis-servers first, then Sentinels.
const (
	redisServers   = 3
	redisSentinels = 3
)

// ErrNoPrimary is wrapped by Primary's error when no majority of the
// Sentinels names the same primary.
var ErrNoPrimary = errors.New("lab: no primary")

// RedisUnavailable says why StartRedisSentinel and StartRedisNodes cannot
// run here, or "".
func RedisUnavailable() string {
	if reason := Unavailable(); reason != "" {
		return reason
	}
	if _, err := exec.LookPath(RedisBinary); err != nil {
		return fmt.Sprintf("no Redis server: %v", err)
	}
	return ""
}

// RedisSentinel is a lab running a Redis primary, two replicas and three
// Sentinels: members 0 to 2 run redis-servers (0 is the first primary),
// members 3 to 5 run Sentinels with a quorum of 2. The Lab's node controls
// and partitions act on them.
type RedisSentinel struct {
	*Lab
}

// StartRedisSentinel starts a primary (member 0), two replicas of it
// (members 1, 2) and three Sentinels (members 3 to 5) that monitor it as
// RedisMasterName, with a 1 s down-after-milliseconds and a 2 s
// failover-timeout. It returns once both replicas are in sync and every
// Sentinel knows both replicas and the other Sentinels, so that a failover
// can follow at once. opts.Members must be 0 or 6. The servers keep no
// data on disk (no RDB, no AOF); each writes its redis.conf once, at its
// first start or after a wipe, and Sentinel's CONFIG REWRITE keeps it up
// to date, so a restarted server comes back as what it last was told to
// be. Close the lab to end it.
func StartRedisSentinel(ctx context.Context, opts Options) (*RedisSentinel, error) {
	if opts.Members != 0 && opts.Members != redisServers+redisSentinels {
		return nil, fmt.Errorf("lab: a Redis Sentinel lab has %d members, not %d", redisServers+redisSentinels, opts.Members)
	}
	opts.Members = redisServers + redisSentinels
	l, err := New(ctx, opts)
	if err != nil {
		return nil, err
	}
	r := &RedisSentinel{Lab: l}
	if err := r.start(ctx); err != nil {
		for _, m := range l.Members() {
			err = fmt.Errorf("%w\nmember %d's log:\n%s", err, m.Index(), m.LogTail(10))
		}
		return nil, errors.Join(err, l.Close())
	}
	return r, nil
}

// start starts the servers, waits for the replicas to sync, then starts
// the Sentinels and waits until they know the whole group.
func (r *RedisSentinel) start(ctx context.Context) error {
	primary := r.Addr(0)
	for i := range redisServers {
		var extra []string
		if i > 0 {
			extra = []string{"replicaof " + strings.Replace(primary, ":", " ", 1)}
		}
		if err := r.Member(i).Start(redisConfCommand(r.Member(i), redisPort, false, extra)); err != nil {
			return err
		}
	}
	for i := 1; i < redisServers; i++ {
		if err := r.AwaitReplica(ctx, i); err != nil {
			return err
		}
	}
	for i := redisServers; i < redisServers+redisSentinels; i++ {
		if err := r.Member(i).Start(sentinelCommand(r.Member(i), primary)); err != nil {
			return err
		}
	}
	for i := redisServers; i < redisServers+redisSentinels; i++ {
		if err := poll(ctx, fmt.Sprintf("Sentinel %d to know the group", i), func(ctx context.Context) error {
			return r.sentinelKnowsAll(ctx, i)
		}); err != nil {
			return err
		}
	}
	return nil
}

// redisConfCommand is a redis-server on m's address at port, reading
// redis.conf in its data directory, which Prepare writes unless one is
// there (always, if rewrite). The server keeps nothing on disk.
func redisConfCommand(m *Member, port int, rewrite bool, extra []string) Command {
	lines := append([]string{
		"bind " + m.IP().String(),
		"port " + strconv.Itoa(port),
		"protected-mode no",
		"daemonize no",
		`logfile ""`,
		"dir " + m.DataDir(),
		`save ""`,
		"appendonly no",
		"repl-diskless-sync-delay 0",
	}, extra...)
	conf := filepath.Join(m.DataDir(), "redis.conf")
	return Command{
		Args:    []string{RedisBinary, conf},
		Prepare: writeConf(conf, lines, rewrite),
	}
}

// sentinelCommand is a Sentinel on m's address monitoring primary.
func sentinelCommand(m *Member, primary string) Command {
	lines := []string{
		"bind " + m.IP().String(),
		"port " + strconv.Itoa(sentinelPort),
		"protected-mode no",
		"daemonize no",
		`logfile ""`,
		"dir " + m.DataDir(),
		fmt.Sprintf("sentinel monitor %s %s %d", RedisMasterName, strings.Replace(primary, ":", " ", 1), redisSentinels/2+1),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", RedisMasterName, sentinelDownAfter.Milliseconds()),
		fmt.Sprintf("sentinel failover-timeout %s %d", RedisMasterName, sentinelFailover.Milliseconds()),
		fmt.Sprintf("sentinel parallel-syncs %s %d", RedisMasterName, redisServers-1),
	}
	conf := filepath.Join(m.DataDir(), "sentinel.conf")
	return Command{Args: []string{RedisBinary, conf, "--sentinel"}, Prepare: writeConf(conf, lines, false)}
}

// writeConf returns a Prepare that writes lines to path, unless the file
// exists and rewrite is false: the server's own rewrites then survive a
// restart, as they would in production.
func writeConf(path string, lines []string, rewrite bool) func(string) error {
	return func(string) error {
		if _, err := os.Stat(path); err == nil && !rewrite {
			return nil
		}
		return writeLines(path, lines)
	}
}

// Addr is member i's address with its server's port: a redis-server's or
// a Sentinel's.
func (r *RedisSentinel) Addr(i int) string {
	m := r.Member(i)
	if m == nil {
		return ""
	}
	port := redisPort
	if i >= redisServers {
		port = sentinelPort
	}
	return netip.AddrPortFrom(m.IP(), uint16(port)).String()
}

// Servers are the indices of the members that run redis-servers.
func (r *RedisSentinel) Servers() []int { return indices(0, redisServers) }

// Sentinels are the indices of the members that run Sentinels.
func (r *RedisSentinel) Sentinels() []int { return indices(redisServers, redisServers+redisSentinels) }

// SentinelAddrs are the Sentinels' addresses.
func (r *RedisSentinel) SentinelAddrs() []string {
	var addrs []string
	for _, i := range r.Sentinels() {
		addrs = append(addrs, r.Addr(i))
	}
	return addrs
}

// indices is from, from+1, ..., to-1.
func indices(from, to int) []int {
	var is []int
	for i := from; i < to; i++ {
		is = append(is, i)
	}
	return is
}

// FailoverOptions are go-redis options for a client of the group through
// its Sentinels, dialing through the lab's Dialer, with 1 s timeouts; a
// test may change them before redis.NewFailoverClient.
func (r *RedisSentinel) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:      RedisMasterName,
		SentinelAddrs:   r.SentinelAddrs(),
		Dialer:          r.Dialer().DialContext,
		DialTimeout:     time.Second,
		ReadTimeout:     time.Second,
		WriteTimeout:    time.Second,
		DisableIdentity: true,
	}
}

// FailoverClient is a go-redis client of whichever server the Sentinels
// name the primary, made with FailoverOptions. Close it before the lab.
func (r *RedisSentinel) FailoverClient() *redis.Client {
	return redis.NewFailoverClient(r.FailoverOptions())
}

// Client is a go-redis client of member i alone (a server or a Sentinel),
// dialing through the lab's Dialer. Close it before the lab.
func (r *RedisSentinel) Client(i int) *redis.Client { return r.client(r.Addr(i), time.Second, 0) }

// client is a go-redis client of addr through the lab's Dialer, speaking
// RESP2, with the given timeouts and retries.
func (l *Lab) client(addr string, timeout time.Duration, retries int) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: addr, Dialer: l.Dialer().DialContext, Protocol: 2, DisableIdentity: true,
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, MaxRetries: retries,
	})
}

// ask runs one question against member addr with a fresh connection, so
// that a dead or cut-off member costs at most askTimeout.
func (l *Lab) ask(ctx context.Context, addr string, q func(ctx context.Context, c *redis.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	c := l.client(addr, askTimeout, -1)
	defer c.Close()
	return q(ctx, c)
}

// Primary asks every running, unpaused Sentinel which server is the
// primary and returns the index of the one a majority of all the
// Sentinels names, or an error wrapping ErrNoPrimary.
func (r *RedisSentinel) Primary(ctx context.Context) (int, error) {
	votes, err := r.votes(ctx)
	for i, n := range votes {
		if 2*n > redisSentinels {
			return i, nil
		}
	}
	return -1, fmt.Errorf("%w named by a majority of the Sentinels (votes %v): %w", ErrNoPrimary, votes, err)
}

// votes counts, for each server, the running, unpaused Sentinels that
// name it the primary; the error joins those that named none.
func (r *RedisSentinel) votes(ctx context.Context) (map[int]int, error) {
	votes := map[int]int{}
	var errs []error
	for _, s := range r.Sentinels() {
		if m := r.Member(s); !m.Running() || m.Paused() {
			continue
		}
		var reply []string
		err := r.ask(ctx, r.Addr(s), func(ctx context.Context, c *redis.Client) error {
			var err error
			reply, err = c.Do(ctx, "SENTINEL", "get-master-addr-by-name", RedisMasterName).StringSlice()
			return err
		})
		if err == nil {
			var i int
			if i, err = r.serverAt(reply); err == nil {
				votes[i]++
				continue
			}
		}
		errs = append(errs, fmt.Errorf("sentinel %d: %w", s, err))
	}
	return votes, errors.Join(errs...)
}

// AwaitSettled waits until every Sentinel names the same primary and
// every other server replicates from it over a link that is up, so that
// no failover or reconfiguration is under way, and returns the primary.
func (r *RedisSentinel) AwaitSettled(ctx context.Context) (int, error) {
	primary := -1
	err := poll(ctx, "the Sentinel group to settle", func(ctx context.Context) error {
		votes, err := r.votes(ctx)
		if err != nil {
			return err
		}
		for i, n := range votes {
			if n == redisSentinels {
				primary = i
			}
		}
		if primary < 0 {
			return fmt.Errorf("the Sentinels are split: %v", votes)
		}
		for _, i := range others(r.Servers(), primary) {
			if err := r.replicates(ctx, i, primary); err != nil {
				return err
			}
		}
		return nil
	})
	return primary, err
}

// serverAt is the index of the server at a Sentinel's [ip, port] answer.
func (r *RedisSentinel) serverAt(reply []string) (int, error) {
	if len(reply) != 2 {
		return -1, fmt.Errorf("lab: a Sentinel answered %q for the primary's address", reply)
	}
	addr := reply[0] + ":" + reply[1]
	for _, i := range r.Servers() {
		if r.Addr(i) == addr {
			return i, nil
		}
	}
	return -1, fmt.Errorf("lab: a Sentinel named %s, no server of the lab", addr)
}

// role is what a redis-server's ROLE says: "master", or "slave" with its
// primary's address and whether the link to it is up.
type role struct {
	kind      string
	primary   string
	connected bool
}

// role asks server i for its ROLE.
func (r *RedisSentinel) role(ctx context.Context, i int) (role, error) {
	var reply []any
	err := r.ask(ctx, r.Addr(i), func(ctx context.Context, c *redis.Client) error {
		var err error
		reply, err = c.Do(ctx, "ROLE").Slice()
		return err
	})
	if err != nil {
		return role{}, fmt.Errorf("lab: server %d's ROLE: %w", i, err)
	}
	return parseRole(reply)
}

// parseRole reads a ROLE reply in RESP2.
func parseRole(reply []any) (role, error) {
	kind, _ := firstString(reply)
	switch {
	case kind == "master":
		return role{kind: kind}, nil
	case kind == "slave" && len(reply) >= 4:
		ip, ok1 := reply[1].(string)
		port, ok2 := reply[2].(int64)
		state, ok3 := reply[3].(string)
		if ok1 && ok2 && ok3 {
			return role{kind: kind, primary: ip + ":" + strconv.FormatInt(port, 10), connected: state == "connected"}, nil
		}
	}
	return role{}, fmt.Errorf("lab: ROLE answered %v", reply)
}

// firstString is reply's first element if it is a string.
func firstString(reply []any) (string, bool) {
	if len(reply) == 0 {
		return "", false
	}
	s, ok := reply[0].(string)
	return s, ok
}

// AwaitFailover waits until a majority of the Sentinels names a primary
// other than old and that server says it is a master, and returns its
// index.
func (r *RedisSentinel) AwaitFailover(ctx context.Context, old int) (int, error) {
	next := -1
	err := poll(ctx, fmt.Sprintf("a failover from server %d", old), func(ctx context.Context) error {
		i, err := r.Primary(ctx)
		if err != nil {
			return err
		}
		if i == old {
			return fmt.Errorf("the Sentinels still name server %d", old)
		}
		ro, err := r.role(ctx, i)
		if err != nil {
			return err
		}
		if ro.kind != "master" {
			return fmt.Errorf("the Sentinels name server %d, which says it is a %s", i, ro.kind)
		}
		next = i
		return nil
	})
	return next, err
}

// AwaitReplica waits until server i replicates, over a link that is up,
// from the primary: the one the Sentinels name, or server 0 while no
// Sentinel runs.
func (r *RedisSentinel) AwaitReplica(ctx context.Context, i int) error {
	if i < 0 || i >= redisServers {
		return fmt.Errorf("lab: no Redis server %d", i)
	}
	return poll(ctx, fmt.Sprintf("server %d to replicate", i), func(ctx context.Context) error {
		primary := 0
		if r.Member(redisServers).Running() {
			var err error
			if primary, err = r.Primary(ctx); err != nil {
				return err
			}
		}
		return r.replicates(ctx, i, primary)
	})
}

// replicates reports nil if server i replicates from server primary over
// a link that is up.
func (r *RedisSentinel) replicates(ctx context.Context, i, primary int) error {
	if primary == i {
		return fmt.Errorf("server %d is the primary", i)
	}
	ro, err := r.role(ctx, i)
	switch {
	case err != nil:
		return err
	case ro.kind != "slave" || ro.primary != r.Addr(primary):
		return fmt.Errorf("server %d is a %s of %q, not a replica of server %d", i, ro.kind, ro.primary, primary)
	case !ro.connected:
		return fmt.Errorf("server %d's link to server %d is not up", i, primary)
	}
	return nil
}

// sentinelKnowsAll reports nil once Sentinel i sees the primary up and
// knows every replica and every other Sentinel.
func (r *RedisSentinel) sentinelKnowsAll(ctx context.Context, i int) error {
	var pairs []string
	err := r.ask(ctx, r.Addr(i), func(ctx context.Context, c *redis.Client) error {
		var err error
		pairs, err = c.Do(ctx, "SENTINEL", "master", RedisMasterName).StringSlice()
		return err
	})
	if err != nil {
		return err
	}
	info := map[string]string{}
	for k := 0; k+1 < len(pairs); k += 2 {
		info[pairs[k]] = pairs[k+1]
	}
	if info["flags"] != "master" || info["num-slaves"] != strconv.Itoa(redisServers-1) ||
		info["num-other-sentinels"] != strconv.Itoa(redisSentinels-1) {
		return fmt.Errorf("sentinel %d sees flags %q, %s replicas, %s other Sentinels",
			i, info["flags"], info["num-slaves"], info["num-other-sentinels"])
	}
	return nil
}

// others is xs without x.
func others(xs []int, x int) []int {
	var rest []int
	for _, y := range xs {
		if y != x {
			rest = append(rest, y)
		}
	}
	return rest
}
