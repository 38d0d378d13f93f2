package mysqlfake

import (
	"context"
	"database/sql/driver"
	"strings"
	"unicode"

	"github.com/go-sql-driver/mysql"

	"github.com/lockproof/lockproof/fakes/internal/gatehook"
)

// GatedConnector returns a database/sql connector for the
// go-sql-driver/mysql DSN dsn (open it with sql.OpenDB) whose connections
// pass every round trip through the locks.Gate of its context (see
// locks.GateRequest), named "mysql " and the statement's first keyword:
// "mysql UPDATE", "mysql SELECT", with the second for those that need it
// ("mysql CREATE TABLE"). Gated are ExecContext and QueryContext (done once
// the statement's result is in; the rows of a query are read after),
// PingContext ("mysql PING"), BeginTx ("mysql BEGIN"), Commit and Rollback
// ("mysql COMMIT", "mysql ROLLBACK", on the context given to BeginTx, which
// database/sql passes no further), PrepareContext ("mysql PREPARE UPDATE")
// and the execution of a prepared statement ("mysql UPDATE"). The pools of
// Server (DB and OpenDB) use it, on the in-process engine and on a
// real server alike.
//
// Not gated: opening a connection (its dial and login depend on the state
// of the pool, not on the operation), closing a statement (the protocol
// sends no reply), a statement the driver declines with driver.ErrSkip
// (arguments without interpolateParams: database/sql prepares it instead,
// and that is gated), and a Rollback that database/sql sends by itself once
// the transaction's context has ended.
func GatedConnector(dsn string) (driver.Connector, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	return gatedMySQLConnector(cfg)
}

// GatedConnectorFor is GatedConnector of a configuration, for one a DSN
// cannot carry (a DialFunc, such as the cluster lab's Dialer).
func GatedConnectorFor(cfg *mysql.Config) (driver.Connector, error) {
	return gatedMySQLConnector(cfg)
}

// gatedMySQLConnector is GatedConnector of a parsed DSN.
func gatedMySQLConnector(cfg *mysql.Config) (driver.Connector, error) {
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return mysqlGateConnector{base: c, interpolates: cfg.InterpolateParams}, nil
}

// mysqlGateConnector is the connector of GatedConnector.
type mysqlGateConnector struct {
	base         driver.Connector
	interpolates bool // statements with arguments are sent as text, not declined
}

// Connect opens a connection, ungated; see GatedConnector.
func (c mysqlGateConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &mysqlGateConn{base: conn, interpolates: c.interpolates}, nil
}

// Driver returns the driver of the wrapped connector.
func (c mysqlGateConnector) Driver() driver.Driver { return c.base.Driver() }

// mysqlGateConn gates the round trips of one go-sql-driver/mysql
// connection. The driver's connection implements every interface this one
// forwards to; a method whose interface it lacks answers driver.ErrSkip,
// which database/sql takes as "use another way".
type mysqlGateConn struct {
	base         driver.Conn
	interpolates bool
}

var (
	_ driver.ExecerContext      = (*mysqlGateConn)(nil)
	_ driver.QueryerContext     = (*mysqlGateConn)(nil)
	_ driver.ConnPrepareContext = (*mysqlGateConn)(nil)
	_ driver.ConnBeginTx        = (*mysqlGateConn)(nil)
	_ driver.Pinger             = (*mysqlGateConn)(nil)
	_ driver.SessionResetter    = (*mysqlGateConn)(nil)
	_ driver.Validator          = (*mysqlGateConn)(nil)
	_ driver.NamedValueChecker  = (*mysqlGateConn)(nil)
)

// Prepare prepares without a context: database/sql calls it only for
// drivers without PrepareContext, so it is not gated.
func (c *mysqlGateConn) Prepare(query string) (driver.Stmt, error) {
	st, err := c.base.Prepare(query)
	if err != nil {
		return nil, err
	}
	return &mysqlGateStmt{base: st, what: mysqlStatementName(query)}, nil
}

// Close closes the connection.
func (c *mysqlGateConn) Close() error { return c.base.Close() }

// Begin is the deprecated Begin; database/sql uses BeginTx.
func (c *mysqlGateConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// BeginTx starts a transaction, gated as "mysql BEGIN"; its Commit and
// Rollback are gated with ctx.
func (c *mysqlGateConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	b, ok := c.base.(driver.ConnBeginTx)
	if !ok {
		return nil, driver.ErrSkip
	}
	gctx, done := gatehook.Gate(ctx, "mysql BEGIN")
	tx, err := b.BeginTx(gctx, opts)
	done()
	if err != nil {
		return nil, err
	}
	return &mysqlGateTx{base: tx, ctx: ctx}, nil
}

// PrepareContext prepares query, gated as "mysql PREPARE <KEYWORD>".
func (c *mysqlGateConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	p, ok := c.base.(driver.ConnPrepareContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	what := mysqlStatementName(query)
	gctx, done := gatehook.Gate(ctx, "mysql PREPARE "+strings.TrimPrefix(what, "mysql "))
	st, err := p.PrepareContext(gctx, query)
	done()
	if err != nil {
		return nil, err
	}
	return &mysqlGateStmt{base: st, what: what}, nil
}

// declines reports whether the driver will answer driver.ErrSkip without
// sending anything: arguments it does not interpolate.
func (c *mysqlGateConn) declines(args []driver.NamedValue) bool {
	return len(args) > 0 && !c.interpolates
}

// ExecContext runs query, gated by its keyword.
func (c *mysqlGateConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.base.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	if c.declines(args) {
		return e.ExecContext(ctx, query, args)
	}
	gctx, done := gatehook.Gate(ctx, mysqlStatementName(query))
	defer done()
	return e.ExecContext(gctx, query, args)
}

// QueryContext runs query, gated by its keyword until the result is in.
func (c *mysqlGateConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.base.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	if c.declines(args) {
		return q.QueryContext(ctx, query, args)
	}
	gctx, done := gatehook.Gate(ctx, mysqlStatementName(query))
	defer done()
	return q.QueryContext(gctx, query, args)
}

// Ping checks the connection, gated as "mysql PING".
func (c *mysqlGateConn) Ping(ctx context.Context) error {
	p, ok := c.base.(driver.Pinger)
	if !ok {
		return nil // database/sql's behaviour for a driver without Ping
	}
	gctx, done := gatehook.Gate(ctx, "mysql PING")
	defer done()
	return p.Ping(gctx)
}

// ResetSession forwards; the driver sends nothing.
func (c *mysqlGateConn) ResetSession(ctx context.Context) error {
	if r, ok := c.base.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

// IsValid forwards.
func (c *mysqlGateConn) IsValid() bool {
	if v, ok := c.base.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// CheckNamedValue forwards.
func (c *mysqlGateConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.base.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// mysqlGateTx gates Commit and Rollback with the context of BeginTx.
type mysqlGateTx struct {
	base driver.Tx
	ctx  context.Context
}

// Commit commits, gated as "mysql COMMIT".
func (t *mysqlGateTx) Commit() error {
	_, done := gatehook.Gate(t.ctx, "mysql COMMIT")
	defer done()
	return t.base.Commit()
}

// Rollback rolls back, gated as "mysql ROLLBACK" unless the transaction's
// context has ended: database/sql then rolls back from a goroutine of its
// own, and the operation may be over.
func (t *mysqlGateTx) Rollback() error {
	if t.ctx.Err() != nil {
		return t.base.Rollback()
	}
	_, done := gatehook.Gate(t.ctx, "mysql ROLLBACK")
	defer done()
	return t.base.Rollback()
}

// mysqlGateStmt gates the executions of a prepared statement.
type mysqlGateStmt struct {
	base driver.Stmt
	what string
}

var (
	_ driver.StmtExecContext   = (*mysqlGateStmt)(nil)
	_ driver.StmtQueryContext  = (*mysqlGateStmt)(nil)
	_ driver.NamedValueChecker = (*mysqlGateStmt)(nil)
)

// Close closes the statement; the protocol sends no reply.
func (s *mysqlGateStmt) Close() error { return s.base.Close() }

// NumInput forwards.
func (s *mysqlGateStmt) NumInput() int { return s.base.NumInput() }

// Exec is the deprecated Exec; database/sql uses ExecContext.
func (s *mysqlGateStmt) Exec(args []driver.Value) (driver.Result, error) {
	//lint:ignore SA1019 driver.Stmt requires Exec; it forwards to the driver's own
	return s.base.Exec(args)
}

// Query is the deprecated Query; database/sql uses QueryContext.
func (s *mysqlGateStmt) Query(args []driver.Value) (driver.Rows, error) {
	//lint:ignore SA1019 driver.Stmt requires Query; it forwards to the driver's own
	return s.base.Query(args)
}

// ExecContext executes the statement, gated by its keyword.
func (s *mysqlGateStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	e, ok := s.base.(driver.StmtExecContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	gctx, done := gatehook.Gate(ctx, s.what)
	defer done()
	return e.ExecContext(gctx, args)
}

// QueryContext executes the statement, gated by its keyword until the
// result is in.
func (s *mysqlGateStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := s.base.(driver.StmtQueryContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	gctx, done := gatehook.Gate(ctx, s.what)
	defer done()
	return q.QueryContext(gctx, args)
}

// CheckNamedValue forwards.
func (s *mysqlGateStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := s.base.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// mysqlTwoWords are the statements named by their first two keywords.
var mysqlTwoWords = map[string]bool{
	"CREATE": true, "DROP": true, "ALTER": true, "SHOW": true, "START": true, "LOCK": true, "UNLOCK": true,
}

// mysqlStatementName is "mysql " and the first keyword of query (two for
// the statements of mysqlTwoWords), after any leading space, comment or
// parenthesis.
func mysqlStatementName(query string) string {
	first, rest := mysqlKeyword(query)
	if first == "" {
		return "mysql ?"
	}
	if mysqlTwoWords[first] {
		if second, _ := mysqlKeyword(rest); second != "" {
			first += " " + second
		}
	}
	return "mysql " + first
}

// mysqlKeyword returns the first word of s in upper case, skipping
// leading space, comments and opening parentheses, and what follows it.
func mysqlKeyword(s string) (word, rest string) {
	for {
		s = strings.TrimLeftFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == '(' })
		switch {
		case strings.HasPrefix(s, "/*"):
			end := strings.Index(s, "*/")
			if end < 0 {
				return "", ""
			}
			s = s[end+2:]
		case strings.HasPrefix(s, "#"), strings.HasPrefix(s, "-- "):
			end := strings.IndexByte(s, '\n')
			if end < 0 {
				return "", ""
			}
			s = s[end+1:]
		default:
			n := strings.IndexFunc(s, func(r rune) bool { return !(unicode.IsLetter(r) || r == '_') })
			if n < 0 {
				n = len(s)
			}
			return strings.ToUpper(s[:n]), s[n:]
		}
	}
}
