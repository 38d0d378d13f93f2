package lab

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// The programs and libraries a Galera cluster needs, as Debian 12 installs
// them (mariadb-server 10.11, galera-4, mariadb-backup, socat, faketime).
var (
	// MariaDBServer is the server each member runs.
	MariaDBServer = "/usr/sbin/mariadbd"
	// MariaDBInstallDB makes the system tables of a new data directory.
	MariaDBInstallDB = "/usr/bin/mariadb-install-db"
	// GaleraProvider is the replication library mariadbd loads.
	GaleraProvider = "/usr/lib/galera/libgalera_smm.so"
	// FakeTimeLibrary is libfaketime's preload library for threaded
	// programs, which offsets a member's wall clock (GaleraOptions.Skew).
	FakeTimeLibrary = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
)

// galeraTools are the programs a joining member's state transfer runs
// (wsrep_sst_mariabackup streams a backup through socat).
var galeraTools = []string{"mariabackup", "socat", "wsrep_sst_mariabackup", "my_print_defaults"}

// templateShutdown bounds the template server's clean shutdown.
const templateShutdown = 20 * time.Second

// galeraPort is MySQL's port on every member's own address.
const galeraPort = 3306

// GaleraUnavailable says why StartGalera cannot run here, or "".
func GaleraUnavailable() string {
	if reason := Unavailable(); reason != "" {
		return reason
	}
	for _, path := range []string{MariaDBServer, MariaDBInstallDB, GaleraProvider} {
		if _, err := os.Stat(path); err != nil {
			return fmt.Sprintf("no Galera cluster (apt-get install mariadb-server galera-4): %v", err)
		}
	}
	for _, tool := range galeraTools {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Sprintf("no Galera state transfer (apt-get install mariadb-backup socat): %v", err)
		}
	}
	return ""
}

// GaleraOptions configures a Galera cluster.
type GaleraOptions struct {
	Options
	// Skew offsets the wall clock of member i by Skew[i] through
	// libfaketime from its first start (0 starts it true, to be skewed
	// later by SetSkew): NOW() on that member runs ahead (or behind). Its
	// monotonic clock, and Galera's timers, are left true.
	Skew map[int]time.Duration
}

// Galera is a lab whose members run a MariaDB Galera cluster: every member
// takes writes (multi-primary), and a member cut off from the majority
// leaves the primary component and refuses queries. Its Lab's node
// controls and partitions act on it.
type Galera struct {
	*Lab
	template string
	// booted is set once member 0 bootstrapped the cluster: every later
	// start of any member joins it.
	booted atomic.Bool
	// skewed are the members that run under libfaketime (GaleraOptions.Skew).
	skewed map[int]bool
}

// StartGalera starts a Galera cluster of opts.Members members (3 if 0), one
// mariadbd per namespace with a 32 MiB buffer pool: member 0 bootstraps
// the cluster and the others join it by state transfer (mariabackup). It
// returns once every member is synced. Root has no password, over TCP
// from the test process (DB, Config). Close the cluster to end it.
func StartGalera(ctx context.Context, opts GaleraOptions) (*Galera, error) {
	if opts.Members == 0 {
		opts.Members = 3
	}
	for i, d := range opts.Skew {
		if i < 0 || i >= opts.Members {
			return nil, fmt.Errorf("lab: skew %v for member %d of %d", d, i, opts.Members)
		}
	}
	if len(opts.Skew) > 0 {
		if _, err := os.Stat(FakeTimeLibrary); err != nil {
			return nil, fmt.Errorf("lab: clock skew needs libfaketime (apt-get install faketime): %w", err)
		}
	}
	l, err := New(ctx, opts.Options)
	if err != nil {
		return nil, err
	}
	g := &Galera{Lab: l, template: filepath.Join(l.dir, "galera-template"), skewed: map[int]bool{}}
	for i := range opts.Skew {
		g.skewed[i] = true
	}
	if err := g.start(ctx, opts.Skew); err != nil {
		return nil, errors.Join(err, g.describeLogs(), l.Close())
	}
	return g, nil
}

// start makes the template data directory, bootstraps member 0 and joins
// the others one by one (a donor serves one joiner at a time).
func (g *Galera) start(ctx context.Context, skew map[int]time.Duration) error {
	if err := g.makeTemplate(ctx); err != nil {
		return err
	}
	for i, m := range g.Members() {
		if g.skewed[i] {
			if err := g.writeSkew(i, skew[i]); err != nil {
				return err
			}
		}
		if err := m.Start(g.command(i)); err != nil {
			return err
		}
		if err := g.AwaitSynced(ctx, i); err != nil {
			return err
		}
		g.booted.Store(true)
	}
	return nil
}

// describeLogs is an error carrying the last lines of every member's log.
func (g *Galera) describeLogs() error {
	var b strings.Builder
	for _, m := range g.Members() {
		fmt.Fprintf(&b, "member %d's log:\n%s\n", m.Index(), m.LogTail(15))
	}
	return errors.New(b.String())
}

// makeTemplate makes the data directory every member starts from: the
// system tables, root@'%' without a password, and a Galera state (a
// cluster id and position) from one bootstrap run on loopback, cleanly
// shut down. Members that share that state need only an incremental state
// transfer to join, not a full backup.
func (g *Galera) makeTemplate(ctx context.Context) error {
	extra := filepath.Join(g.dir, "galera-root.sql")
	grant := "INSERT INTO mysql.global_priv (Host, User, Priv) " +
		"SELECT '%', User, Priv FROM mysql.global_priv WHERE Host = 'localhost' AND User = 'root';\n"
	if err := os.WriteFile(extra, []byte(grant), 0o600); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	_, err := output(ctx, MariaDBInstallDB, "--no-defaults", "--datadir="+g.template, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db", "--extra-file="+extra,
		"--innodb-buffer-pool-size=32M")
	if err != nil {
		return fmt.Errorf("lab: making Galera's data directory: %w", err)
	}
	cnf := filepath.Join(g.dir, "galera-template.cnf")
	socket := filepath.Join(g.dir, "galera-template.sock")
	lines := append(mariadbSettings(g.template, socket),
		"skip-networking",
		"wsrep-cluster-address=gcomm://",
		"wsrep-node-address=127.0.0.1",
		"wsrep-new-cluster")
	if err := writeLines(cnf, lines); err != nil {
		return err
	}
	cmd := exec.Command(MariaDBServer, "--defaults-file="+cnf)
	logPath := filepath.Join(g.dir, "galera-template.log")
	log, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("lab: bootstrapping Galera's template: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// mariadbd makes its socket before its start-up ends, and a SIGTERM
	// in between can hang it (the main thread waits in init_slave for a
	// thread the shutdown never starts): wait until it answers a query.
	err = awaitFile(ctx, socket, done)
	if err == nil {
		err = awaitServing(ctx, socket, done)
	}
	// SIGTERM is mariadbd's clean shutdown, which saves the position.
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
	select {
	case werr := <-done:
		if err == nil && werr != nil {
			err = fmt.Errorf("mariadbd's shutdown: %w", werr)
		}
	case <-time.After(templateShutdown):
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		<-done
		err = errors.Join(err, fmt.Errorf("mariadbd did not shut down within %v of SIGTERM", templateShutdown))
	}
	if err != nil {
		tail, _ := os.ReadFile(logPath)
		return fmt.Errorf("lab: bootstrapping Galera's template: %w\n%s", err, lastLines(string(tail), 15))
	}
	// The saved view names the template's node id, which no member may
	// share; the saved position (grastate.dat) stays.
	if err := os.Remove(filepath.Join(g.template, "gvwstate.dat")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("lab: %w", err)
	}
	return nil
}

// awaitFile waits until path exists, failing if done delivers first.
func awaitFile(ctx context.Context, path string, done <-chan error) error {
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case err := <-done:
			return fmt.Errorf("mariadbd exited before writing %s: %v", path, err)
		case <-ctx.Done():
			return fmt.Errorf("awaiting %s: %w", path, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

// awaitServing waits until the mariadbd listening on the Unix socket
// answers root's query, failing if done delivers first.
func awaitServing(ctx context.Context, socket string, done <-chan error) error {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "unix", socket
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	for {
		qctx, cancel := context.WithTimeout(ctx, 2*askTimeout)
		err := db.QueryRowContext(qctx, "SELECT 1").Scan(new(int))
		cancel()
		if err == nil {
			return nil
		}
		select {
		case werr := <-done:
			return fmt.Errorf("mariadbd exited before serving: %v (last query: %v)", werr, err)
		case <-ctx.Done():
			return fmt.Errorf("awaiting mariadbd's first answer: %w (last query: %v)", ctx.Err(), err)
		case <-time.After(pollEvery):
		}
	}
}

// mariadbSettings are the [mysqld] lines every mariadbd of the lab shares:
// small caches and buffers, and Galera's required row format.
func mariadbSettings(dataDir, socket string) []string {
	return []string{
		"[mysqld]",
		"user=root",
		"datadir=" + dataDir,
		"socket=" + socket,
		"pid-file=" + filepath.Join(dataDir, "mariadbd.pid"),
		"skip-name-resolve",
		"innodb-buffer-pool-size=32M",
		"innodb-log-file-size=16M",
		"innodb-log-buffer-size=2M",
		"aria-pagecache-buffer-size=8M",
		"key-buffer-size=1M",
		"query-cache-size=0",
		"max-connections=64",
		"performance-schema=OFF",
		"binlog-format=ROW",
		"default-storage-engine=InnoDB",
		"innodb-autoinc-lock-mode=2",
		"wsrep-on=ON",
		"wsrep-provider=" + GaleraProvider,
		"wsrep-provider-options=gcache.size=16M",
		"wsrep-sst-method=mariabackup",
		"wsrep-sst-auth=root:",
	}
}

// command is member i's mariadbd. Its Prepare copies the template into an
// empty data directory (the first start, or after a wipe) and writes the
// member's options file: the first start of member 0 bootstraps a new
// cluster, every other start joins the running one.
func (g *Galera) command(i int) Command {
	m := g.Member(i)
	cnf := filepath.Join(m.dir, "my.cnf")
	var peers []string
	for _, p := range g.Members() {
		peers = append(peers, p.IP().String())
	}
	c := Command{
		Args: []string{MariaDBServer, "--defaults-file=" + cnf},
		Prepare: func(dir string) error {
			if _, err := os.Stat(filepath.Join(dir, "mysql")); errors.Is(err, os.ErrNotExist) {
				if err := copyDir(g.template, dir); err != nil {
					return err
				}
			}
			lines := append(mariadbSettings(dir, filepath.Join(m.dir, "mariadbd.sock")),
				"bind-address="+m.IP().String(),
				"port="+strconv.Itoa(galeraPort),
				"wsrep-cluster-address=gcomm://"+strings.Join(peers, ","),
				"wsrep-node-address="+m.IP().String(),
				fmt.Sprintf("wsrep-node-name=m%d", i),
				fmt.Sprintf("wsrep-cluster-name=lockproof-lab-%d", g.num))
			if i == 0 && !g.booted.Load() {
				lines = append(lines, "wsrep-new-cluster")
			}
			// The state transfer script reads this group; without it, it
			// would log to syslog and archive its logs in /tmp.
			lines = append(lines, "[sst]", "sst-log-archive=0")
			return writeLines(cnf, lines)
		},
	}
	if g.skewed[i] {
		// libfaketime reads the offset from the file again at most once a
		// second (its cache), so SetSkew needs no restart.
		c.Env = []string{"LD_PRELOAD=" + FakeTimeLibrary, "FAKETIME_TIMESTAMP_FILE=" + g.skewFile(i),
			"FAKETIME_CACHE_DURATION=1", "FAKETIME_DONT_FAKE_MONOTONIC=1", "FAKETIME_DONT_RESET=1"}
	}
	return c
}

// skewTolerance is how near a member's NOW() must come to the offset
// SetSkew asked for: the query's round trip blurs the reading.
const skewTolerance = time.Second

// SetSkew sets the offset of member i's wall clock to d while it runs (and
// for its later starts), and waits until its NOW() shows it, within a
// second. Only a member given a GaleraOptions.Skew runs under libfaketime;
// another is refused.
func (g *Galera) SetSkew(ctx context.Context, i int, d time.Duration) error {
	if _, err := g.member(i); err != nil {
		return err
	}
	if !g.skewed[i] {
		return fmt.Errorf("lab: Galera member %d runs without libfaketime: give it a GaleraOptions.Skew (0 will do) to skew it", i)
	}
	if err := g.writeSkew(i, d); err != nil {
		return err
	}
	return poll(ctx, fmt.Sprintf("Galera member %d's clock %v off", i, d), func(ctx context.Context) error {
		off, err := g.ClockOffset(ctx, i)
		if err == nil && (off < d-skewTolerance || off > d+skewTolerance) {
			err = fmt.Errorf("its NOW() is %v off", off.Round(time.Millisecond))
		}
		return err
	})
}

// ClockOffset is how far member i's NOW() runs ahead of this machine's
// clock (behind if negative), read to within half the query's round trip.
func (g *Galera) ClockOffset(ctx context.Context, i int) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*askTimeout)
	defer cancel()
	db, err := g.DB(i)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	sent := time.Now()
	var micros int64
	if err := db.QueryRowContext(ctx, "SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)").Scan(&micros); err != nil {
		return 0, fmt.Errorf("lab: Galera member %d's NOW(): %w", i, err)
	}
	mid := sent.Add(time.Since(sent) / 2)
	return time.UnixMicro(micros).Sub(mid), nil
}

// skewFile is the file libfaketime reads member i's offset from.
func (g *Galera) skewFile(i int) string { return filepath.Join(g.Member(i).dir, "faketime") }

// writeSkew writes offset d into member i's skewFile, whole: a rename, so
// that libfaketime never reads half of it.
func (g *Galera) writeSkew(i int, d time.Duration) error {
	path := g.skewFile(i)
	if err := os.WriteFile(path+".new", []byte(faketimeOffset(d)+"\n"), 0o600); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	return nil
}

// faketimeOffset writes d as libfaketime's relative offset, "+10.5s" or
// "-3s".
func faketimeOffset(d time.Duration) string {
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	return sign + strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

// writeLines writes lines to path, one a line.
func writeLines(path string, lines []string) error {
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	return nil
}

// copyDir copies the contents of directory from into directory to, keeping
// modes (cp -a).
func copyDir(from, to string) error {
	if err := run(context.Background(), "cp", "-a", from+"/.", to); err != nil {
		return fmt.Errorf("lab: copying %s: %w", from, err)
	}
	return nil
}

// ClientAddr is member i's MySQL address, ip:port.
func (g *Galera) ClientAddr(i int) string {
	m := g.Member(i)
	if m == nil {
		return ""
	}
	return netip.AddrPortFrom(m.IP(), galeraPort).String()
}

// Config is the go-sql-driver configuration for root on member i, dialing
// through the lab's Dialer; set its Params or DBName before opening it
// with mysql.NewConnector.
func (g *Galera) Config(i int) *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "tcp"
	cfg.Addr = g.ClientAddr(i)
	cfg.DialFunc = g.Dialer().DialContext
	cfg.Timeout = 2 * time.Second
	cfg.ReadTimeout = 5 * time.Second
	cfg.WriteTimeout = 5 * time.Second
	return cfg
}

// DB opens a pool of root connections to member i only, through the lab's
// Dialer. Close it before the cluster.
func (g *Galera) DB(i int) (*sql.DB, error) {
	if _, err := g.member(i); err != nil {
		return nil, err
	}
	connector, err := mysql.NewConnector(g.Config(i))
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	return sql.OpenDB(connector), nil
}

// GaleraStatus is what a member says of its place in the cluster.
type GaleraStatus struct {
	// Ready is wsrep_ready: the member accepts queries.
	Ready bool
	// Cluster is wsrep_cluster_status: "Primary" in the majority's
	// component, "non-Primary" when cut off from it.
	Cluster string
	// State is wsrep_local_state_comment: "Synced", "Joining", "Donor/Desynced"...
	State string
	// Size is wsrep_cluster_size, the members of its component.
	Size int
}

// Synced reports whether the member is ready, synced, in the primary
// component.
func (s GaleraStatus) Synced() bool {
	return s.Ready && s.Cluster == "Primary" && s.State == "Synced"
}

// Status asks member i for its wsrep status, on a connection of its own.
func (g *Galera) Status(ctx context.Context, i int) (GaleraStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*askTimeout)
	defer cancel()
	db, err := g.DB(i)
	if err != nil {
		return GaleraStatus{}, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN "+
		"('wsrep_ready', 'wsrep_cluster_status', 'wsrep_local_state_comment', 'wsrep_cluster_size')")
	if err != nil {
		return GaleraStatus{}, fmt.Errorf("lab: Galera member %d's status: %w", i, err)
	}
	defer rows.Close()
	vars := map[string]string{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return GaleraStatus{}, fmt.Errorf("lab: Galera member %d's status: %w", i, err)
		}
		vars[strings.ToLower(name)] = value
	}
	if err := rows.Err(); err != nil {
		return GaleraStatus{}, fmt.Errorf("lab: Galera member %d's status: %w", i, err)
	}
	return parseGaleraStatus(vars)
}

// parseGaleraStatus reads the four wsrep status variables.
func parseGaleraStatus(vars map[string]string) (GaleraStatus, error) {
	for _, name := range []string{"wsrep_ready", "wsrep_cluster_status", "wsrep_local_state_comment", "wsrep_cluster_size"} {
		if _, ok := vars[name]; !ok {
			return GaleraStatus{}, fmt.Errorf("lab: no %s in the member's status %v (is wsrep on?)", name, vars)
		}
	}
	size, err := strconv.Atoi(vars["wsrep_cluster_size"])
	if err != nil {
		return GaleraStatus{}, fmt.Errorf("lab: wsrep_cluster_size %q: %w", vars["wsrep_cluster_size"], err)
	}
	return GaleraStatus{Ready: vars["wsrep_ready"] == "ON", Cluster: vars["wsrep_cluster_status"],
		State: vars["wsrep_local_state_comment"], Size: size}, nil
}

// AwaitSynced waits until member i is ready and synced in the primary
// component: up after a start, or rejoined after a heal.
func (g *Galera) AwaitSynced(ctx context.Context, i int) error {
	if _, err := g.member(i); err != nil {
		return err
	}
	return poll(ctx, fmt.Sprintf("Galera member %d", i), func(ctx context.Context) error {
		s, err := g.Status(ctx, i)
		if err == nil && !s.Synced() {
			err = fmt.Errorf("status %+v", s)
		}
		return err
	})
}
