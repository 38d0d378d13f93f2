package mysqlfake

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gms "github.com/dolthub/go-mysql-server"
	"github.com/dolthub/go-mysql-server/memory"
	"github.com/dolthub/go-mysql-server/server"
	gmssql "github.com/dolthub/go-mysql-server/sql"
	vtmysql "github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/sqltypes"
	querypb "github.com/dolthub/vitess/go/vt/proto/query"
	"github.com/go-sql-driver/mysql"
	"github.com/sirupsen/logrus"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/internal/fakeutil"
	"github.com/lockproof/lockproof/internal/layout"
	"github.com/lockproof/lockproof/internal/memnet"
	"github.com/lockproof/lockproof/locks"
)

// EnvDSN names the environment variable that points MySQL at a real
// server instead of the in-process engine: a go-sql-driver/mysql DSN without
// a database name, for a user that may create and drop databases, e.g.
// "root@tcp(127.0.0.1:3306)/". Each MySQL call then creates a private
// database and drops it at cleanup.
const EnvDSN = "LOCKPROOF_MYSQL_DSN"

// Server is a MySQL-protocol server with a database of its own:
// github.com/dolthub/go-mysql-server with an in-memory database served over
// the wire protocol on a loopback port, or a real server (At, or for
// New(t) the one named by EnvDSN).
//
// go-mysql-server's in-memory database is not safe for concurrent writers
// (its README says so: concurrent statements lose each other's updates) and
// treats BEGIN/COMMIT/ROLLBACK as no-ops. The fake therefore runs one
// statement at a time, server-wide: every statement is atomic and isolated,
// but a multi-statement transaction is not. Use a real server (EnvDSN)
// for those.
//
// The in-process server has MySQL's named locks (mysql_named.go):
// GET_LOCK(name, timeout) (seconds, fractions allowed; negative waits for
// ever, 0 tries once), RELEASE_LOCK (1, 0 when another session holds the
// lock, NULL when nobody does), IS_FREE_LOCK, IS_USED_LOCK (the holder's
// CONNECTION_ID()) and RELEASE_ALL_LOCKS, owned by the session
// (connection), taken again by it as often as it likes (and released as
// often), compared without regard to case, and released when its
// connection closes; waiters are served first come, first served. A
// GET_LOCK that waits lets the other connections' statements run
// meanwhile (so a statement that reads tables and waits in GET_LOCK is not
// isolated), and its timeout runs on FollowClock's clock when there is
// one. It accepts DO (mysql_wire.go). Not modelled: MySQL's deadlock
// detection between sessions that wait for each other's named locks, and
// its 64-character limit on names.
type Server struct {
	owner    fakeutil.Owner // no control fails a test: kept for the helpers' sake
	dsn      string         // with the database name and the options the helpers set
	database string
	real     bool
	db       *sql.DB
	mem      *memnet.Listener // the in-process server's in-memory connections; nil on a real server
	named    *mysqlNamedLocks // the in-process server's GET_LOCK and kin; nil on a real server
	manual   *fakes.Clock     // ManualTime's clock; nil otherwise

	mu      sync.Mutex
	clock   locks.Clock    // the clock FollowClock follows; nil: the system's
	closers []func() error // run by Close, last first
	closed  bool
}

// quietGMS silences go-mysql-server, which logs every connection through
// logrus's standard logger at Info. Only its errors remain, on stderr.
var quietGMS sync.Once

// Option configures Start (and MySQL).
type Option func(*mysqlConfig)

type mysqlConfig struct {
	dsn           string // MySQLAt
	name          string // part of a real database's name: the test's
	forceEmbedded bool
	manual        *time.Time // ManualTime's start
}

// ManualTime starts the in-process server on a manual fakes.Clock at
// start, which it follows (FollowClock) until Close: time moves only by
// Advance. A real server keeps its own time: Start fails with the option.
func ManualTime(start time.Time) Option { return func(c *mysqlConfig) { c.manual = &start } }

// At makes the fake create a private database on the real server
// behind dsn, a go-sql-driver/mysql DSN without a database name for a user
// that may create and drop databases ("root@tcp(127.0.0.1:3306)/"), instead
// of starting the in-process server. Close drops the database. Default
// (and with dsn ""): the in-process server.
func At(dsn string) Option { return func(c *mysqlConfig) { c.dsn = dsn } }

// ForceEmbedded uses the in-process server even when a real one is
// given, by At or, for MySQL, by EnvDSN. Default: a real server
// when one is given.
func ForceEmbedded() Option { return func(c *mysqlConfig) { c.forceEmbedded = true } }

// mysqlNamed names the real database after a test.
func mysqlNamed(name string) Option { return func(c *mysqlConfig) { c.name = name } }

func newMySQLConfig(opts []Option) mysqlConfig {
	var c mysqlConfig
	fakeutil.ApplyOptions(&c, opts)
	if c.forceEmbedded {
		c.dsn = ""
	}
	return c
}

// New starts a server for one test with Start: the in-process
// server, or a private database on the real server of EnvDSN (read
// here, as a At before opts, the database named after the test)
// unless ForceEmbedded is given. The returned server's DB is ready to
// use; it fails the test if the server cannot be started or reached, and
// everything is closed, and a real server's database dropped, at tb's
// cleanup.
func New(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	return fakeutil.ForTest(tb, "mysqlfake.New", EnvDSN, opts, At,
		func(o []Option) string { return newMySQLConfig(o).dsn },
		func(o ...Option) (*Server, error) { return Start(append(o, mysqlNamed(tb.Name()))...) },
		func(s *Server, tb testing.TB) { s.owner.Own(tb) })
}

// Start starts go-mysql-server on a loopback port chosen by the kernel,
// with an empty in-memory database, or creates a private database on the
// real server given by At (unless ForceEmbedded), for programs
// and examples that have no testing.TB. Close stops it (or drops the
// database).
func Start(opts ...Option) (*Server, error) {
	cfg := newMySQLConfig(opts)
	if cfg.dsn != "" {
		if cfg.manual != nil {
			return nil, errors.New("mysqlfake: ManualTime needs the in-process MySQL server; a real one keeps its own time")
		}
		return startRealMySQL(cfg.name, cfg.dsn)
	}
	s, err := startEmbeddedMySQL()
	if err != nil || cfg.manual == nil {
		return s, err
	}
	manual := fakes.NewClock(*cfg.manual)
	if err := s.FollowClock(manual); err != nil {
		_ = s.Close()
		return nil, err
	}
	s.manual = manual
	return s, nil
}

// startEmbeddedMySQL starts go-mysql-server with an empty in-memory
// database.
func startEmbeddedMySQL() (*Server, error) {
	quietGMS.Do(func() { logrus.SetLevel(logrus.ErrorLevel) })
	const database = "lockproof"
	db := memory.NewDatabase(database)
	db.BaseDatabase.EnablePrimaryKeyIndexes()
	provider := memory.NewDBProvider(db)
	serial := &serialHandler{}
	serial.named = newMySQLNamedLocks(serial)
	engine := gms.NewDefault(mysqlFunctions{DbProvider: provider, fns: serial.named.functions()})
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	mem := memnet.Listen(memnet.Addr(tcp.Addr().String()))
	ln := newEitherListener(tcp, mem)
	srv, err := server.NewServerWithHandler(server.Config{Protocol: "tcp", Address: tcp.Addr().String(), Listener: ln},
		engine, gmssql.NewContext, memory.NewSessionBuilder(provider), nil,
		func(h vtmysql.Handler) (vtmysql.Handler, error) { serial.Handler = h; return serial, nil })
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Start() }()
	s := &Server{
		dsn:      withParams("root@tcp(" + tcp.Addr().String() + ")/" + database),
		database: database,
		mem:      mem,
		named:    serial.named,
	}
	s.closers = append(s.closers, func() error {
		_ = srv.Close()
		select {
		case <-served:
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("the server did not stop within 5s")
		}
	})
	if s.db, err = s.OpenDB(); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// withParams adds the DSN options every helper's pool uses: parseTime, so
// DATETIME columns scan into time.Time, and interpolateParams, so a statement
// with arguments is one round trip instead of prepare, execute and close.
func withParams(dsn string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "parseTime=true&interpolateParams=true"
}

var nonIdent = regexp.MustCompile(`[^A-Za-z0-9_]`)

// startRealMySQL creates a database named after test (if any) on the
// server behind dsn and returns a Server whose pools use it; Close
// drops it.
func startRealMySQL(test, dsn string) (*Server, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("DSN %q: %w", dsn, err)
	}
	if cfg.DBName != "" {
		return nil, fmt.Errorf("DSN %q names database %q; leave it out, each fake creates its own",
			dsn, cfg.DBName)
	}
	name := strings.ToLower(nonIdent.ReplaceAllString(test, "_"))
	if len(name) > 40 {
		name = name[:40]
	}
	if name != "" {
		name += "_"
	}
	database := "lockproof_" + name + locks.NewOwner()[:8]
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+database+"`"); err != nil {
		_ = admin.Close()
		return nil, fmt.Errorf("create database: %w", err)
	}
	cfg.DBName = database
	s := &Server{dsn: withParams(cfg.FormatDSN()), database: database, real: true}
	s.closers = append(s.closers, func() error {
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE `"+database+"`"); err != nil {
			return fmt.Errorf("drop database %s: %w", database, err)
		}
		return nil
	})
	if s.db, err = s.OpenDB(); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// DB returns the server's ready connection pool, on its database, gated as
// OpenDB's are.
func (s *Server) DB() *sql.DB { return s.db }

// DSN returns a go-sql-driver/mysql DSN for the server's database.
func (s *Server) DSN() string { return s.dsn }

// Database returns the name of the server's database.
func (s *Server) Database() string { return s.database }

// Real reports whether the server is a real one (At, EnvDSN).
func (s *Server) Real() bool { return s.real }

// OpenDB opens another connection pool on the server's database, as another
// process would have, and checks that it answers; Close closes it. Like
// DB's, its connections pass every round trip through the locks.Gate of the
// statement's context, as "mysql <KEYWORD>" (see GatedConnector).
//
// On the in-process server its connections are in memory, not through the
// DSN's TCP port (which other clients, and proxies, use): a statement in
// flight is then a runnable goroutine rather than bytes in the kernel, as
// the property suite's scheduler needs (propertytest.Backend.InProcess).
func (s *Server) OpenDB() (*sql.DB, error) {
	return s.openDB(s.inMemory())
}

// openDB is OpenDB with its connections dialed by dial (nil: the driver's
// own dial of the DSN's address).
func (s *Server) openDB(dial fakes.DialFunc) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(s.dsn)
	if err != nil {
		return nil, err
	}
	cfg.DialFunc = dial
	connector, err := gatedMySQLConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("ping %s: %w", s.database, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = db.Close()
		return nil, errors.New("mysqlfake: MySQL server closed")
	}
	s.closers = append(s.closers, db.Close)
	return db, nil
}

// Close closes every pool opened on the server, then stops the in-process
// server or drops the real server's database. Later calls do nothing.
func (s *Server) Close() error {
	s.mu.Lock()
	closers := s.closers
	s.closers, s.closed = nil, true
	s.mu.Unlock()
	var errs []error
	for i := len(closers) - 1; i >= 0; i-- {
		if err := closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DefaultLockTable is mysqllock.DefaultTable, the table ExpireLock works on.
const DefaultLockTable = layout.MySQLDefaultTable

// ExpireLock makes the lease recorded for lock name in DefaultLockTable end
// now; see ExpireLockIn.
func (s *Server) ExpireLock(ctx context.Context, name string) error {
	return s.ExpireLockIn(ctx, DefaultLockTable, name)
}

// ExpireLockIn makes the lease recorded for lock name in table end now, on
// the server's clock, as if its holder had stopped renewing a whole TTL ago.
// table must be a lock table made by mysqllock.CreateTable (columns name,
// owner, fence, expires_at). It fails when no live lease is recorded for
// name, with an error wrapping ErrNoHolder.
func (s *Server) ExpireLockIn(ctx context.Context, table, name string) error {
	if table == "" || nonIdent.MatchString(table) {
		return fmt.Errorf("mysqlfake.New: invalid table name %q", table)
	}
	res, err := s.db.ExecContext(ctx, layout.MySQLExpire(table), name)
	if err != nil {
		return fmt.Errorf("mysqlfake.New: expire %q: %w", name, err)
	}
	n, err := res.RowsAffected()
	switch {
	case err != nil:
		return fmt.Errorf("mysqlfake.New: expire %q: rows affected: %w", name, err)
	case n != 1:
		return fmt.Errorf("mysqlfake.New: expire %q: %w (no live lease recorded, rows affected %d)", name, fakes.ErrNoHolder, n)
	}
	return nil
}

// gmsClock guards go-mysql-server's process-wide time function: one
// server's clock at a time.
var gmsClock struct {
	sync.Mutex
	busy bool
}

// ErrClockTaken is FollowClock's error while another server follows a
// clock: go-mysql-server has one time function per process.
var ErrClockTaken = errors.New("mysqlfake: another in-process MySQL server follows a clock (go-mysql-server has one clock per process)")

// FollowClock makes the in-process server read the time from clock until
// Close: NOW(6) and the other time functions of its statements, so that
// leases recorded on its clock expire when a test advances a manual clock
// (fakes.Clock). Call it before the first statement that reads the time.
//
// go-mysql-server reads the time through one function for the whole
// process, so every in-process server in the process follows clock while
// this one does, and a second FollowClock, on any server, fails with
// ErrClockTaken until this server's Close. A real server keeps its own
// time: there FollowClock fails.
func (s *Server) FollowClock(clock locks.Clock) error {
	if s.real {
		return errors.New("mysqlfake: FollowClock needs the in-process MySQL server; a real one keeps its own time")
	}
	gmsClock.Lock()
	defer gmsClock.Unlock()
	if gmsClock.busy {
		return ErrClockTaken
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("mysqlfake: MySQL server closed")
	}
	gmsClock.busy = true
	// go-mysql-server only offers RunWithNowFunc, which restores the
	// previous function when its callback returns: the callback waits on a
	// goroutine of its own until Close.
	set, release, restored := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(restored)
		_ = gmssql.RunWithNowFunc(clock.Now, func() error {
			close(set)
			<-release
			return nil
		})
	}()
	<-set
	s.named.setClock(clock)
	s.clock = clock
	// Closers run last first: this one goes first so that it runs last,
	// once the server has stopped.
	s.closers = append([]func() error{func() error {
		close(release)
		<-restored
		s.named.setClock(locks.SystemClock{})
		s.mu.Lock()
		s.clock = nil
		s.mu.Unlock()
		gmsClock.Lock()
		gmsClock.busy = false
		gmsClock.Unlock()
		return nil
	}}, s.closers...)
	return nil
}

// serialHandler runs the statements of all connections one at a time (see
// Server), but for a GET_LOCK that waits, which lets the others run
// (pause); and it keeps the named locks of each connection's session.
type serialHandler struct {
	vtmysql.Handler
	named   *mysqlNamedLocks
	mu      sync.Mutex
	running atomic.Uint32 // the connection whose statement holds mu; 0 while none
}

// begin waits for the statement lock for connection conn's statement.
func (h *serialHandler) begin(conn uint32) {
	h.mu.Lock()
	h.running.Store(conn)
}

// end lets the statement lock go.
func (h *serialHandler) end() {
	h.running.Store(0)
	h.mu.Unlock()
}

// pause lets the statement lock go while connection conn's statement
// waits, if that statement holds it, and returns what takes it back.
func (h *serialHandler) pause(conn uint32) (resume func()) {
	if h.running.Load() != conn {
		return func() {}
	}
	h.end()
	return func() { h.begin(conn) }
}

// NewConnection records the connection's end for GET_LOCK's waits.
func (h *serialHandler) NewConnection(c *vtmysql.Conn) {
	if m, ok := c.Conn.(*mysqlClientConn); ok {
		h.named.connected(c.ConnectionID, m.gone)
	}
	h.Handler.NewConnection(c)
}

// ConnectionClosed releases the session's named locks.
func (h *serialHandler) ConnectionClosed(c *vtmysql.Conn) {
	h.named.disconnected(c.ConnectionID)
	h.Handler.ConnectionClosed(c)
}

// ComResetConnection releases the session's named locks, as MySQL's
// COM_RESET_CONNECTION does.
func (h *serialHandler) ComResetConnection(c *vtmysql.Conn) error {
	h.named.releaseAll(c.ConnectionID)
	return h.Handler.ComResetConnection(c)
}

func (h *serialHandler) ComQuery(ctx context.Context, c *vtmysql.Conn, query string, callback vtmysql.ResultSpoolFn) error {
	h.begin(c.ConnectionID)
	defer h.end()
	return h.settle(ctx, c, h.Handler.ComQuery(ctx, c, query, callback))
}

func (h *serialHandler) ComMultiQuery(ctx context.Context, c *vtmysql.Conn, query string, callback vtmysql.ResultSpoolFn) (string, error) {
	h.begin(c.ConnectionID)
	defer h.end()
	rest, err := h.Handler.ComMultiQuery(ctx, c, query, callback)
	return rest, h.settle(ctx, c, err)
}

func (h *serialHandler) ComPrepare(ctx context.Context, c *vtmysql.Conn, query string, prepare *vtmysql.PrepareData) ([]*querypb.Field, error) {
	h.begin(c.ConnectionID)
	defer h.end()
	fields, err := h.Handler.ComPrepare(ctx, c, query, prepare)
	return fields, h.settle(ctx, c, err)
}

func (h *serialHandler) ComStmtExecute(ctx context.Context, c *vtmysql.Conn, prepare *vtmysql.PrepareData, callback func(*sqltypes.Result) error) error {
	h.begin(c.ConnectionID)
	defer h.end()
	return h.settle(ctx, c, h.Handler.ComStmtExecute(ctx, c, prepare, callback))
}

// settle rolls the connection's session back after a failed statement. The
// in-memory session keeps the table data a failed statement read, and its
// next statement would work on (and commit) that stale copy, undoing other
// connections' writes in between. err is returned as it is.
func (h *serialHandler) settle(ctx context.Context, c *vtmysql.Conn, err error) error {
	if err != nil {
		discard := func(*sqltypes.Result, bool) error { return nil }
		_ = h.Handler.ComQuery(ctx, c, "ROLLBACK", discard)
	}
	return err
}

// eitherListener accepts the connections of two listeners, TCP and
// in-memory: go-mysql-server serves one listener. A goroutine per listener
// waits in its Accept; Close closes both, which ends them.
type eitherListener struct {
	tcp      net.Listener
	mem      *memnet.Listener
	accepted chan net.Conn
	done     chan struct{}
	closing  sync.Once
}

func newEitherListener(tcp net.Listener, mem *memnet.Listener) *eitherListener {
	l := &eitherListener{tcp: tcp, mem: mem, accepted: make(chan net.Conn), done: make(chan struct{})}
	go l.pump(tcp)
	go l.pump(mem)
	return l
}

// pump hands what from accepts to Accept until what fails (it was closed).
func (l *eitherListener) pump(from net.Listener) {
	for {
		raw, err := from.Accept()
		if err != nil {
			return
		}
		c := newMySQLClientConn(raw)
		select {
		case l.accepted <- c:
		case <-l.done:
			_ = c.Close()
			return
		}
	}
}

// Accept returns the next connection of either listener, or net.ErrClosed
// once closed.
func (l *eitherListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.accepted:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close closes both listeners.
func (l *eitherListener) Close() error {
	var err error
	l.closing.Do(func() {
		close(l.done)
		err = errors.Join(l.tcp.Close(), l.mem.Close())
	})
	return err
}

// Addr is the TCP listener's address.
func (l *eitherListener) Addr() net.Addr { return l.tcp.Addr() }

// Addr returns the host:port of the server's DSN.
func (s *Server) Addr() string {
	cfg, err := mysql.ParseDSN(s.dsn)
	if err != nil { // every DSN a Server keeps was parsed when it started
		return ""
	}
	return cfg.Addr
}

// Clock returns the clock the in-process server follows (FollowClock,
// ManualTime), or locks.SystemClock.
func (s *Server) Clock() locks.Clock {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clock == nil {
		return locks.SystemClock{}
	}
	return s.clock
}

// LockOptions returns the options a lock needs on this server: its Clock.
// mysqllock keeps its leases in a table of the server's database and takes
// no key prefix.
func (s *Server) LockOptions() []locks.Option { return []locks.Option{locks.WithClock(s.Clock())} }

// Advance moves the manual clock of ManualTime forward by d. Without
// ManualTime it fails the server's test (or panics without a test).
func (s *Server) Advance(d time.Duration) {
	s.owner.Helper()
	switch {
	case s.manual == nil:
		s.owner.Fatalf("mysqlfake: Advance needs manual time: start the fake with mysqlfake.ManualTime(start)")
	case d < 0:
		s.owner.Fatalf("mysqlfake: Advance(%v): time cannot move backwards", d)
	default:
		s.manual.Advance(d)
	}
}

var (
	_ fakes.Server      = (*Server)(nil)
	_ fakes.ManualTimer = (*Server)(nil)
)
