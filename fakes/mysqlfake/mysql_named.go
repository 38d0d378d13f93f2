package mysqlfake

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/dolthub/go-mysql-server/memory"
	gmssql "github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/lockproof/lockproof/locks"
)

// The in-process server's named locks: MySQL's GET_LOCK, RELEASE_LOCK,
// IS_FREE_LOCK, IS_USED_LOCK and RELEASE_ALL_LOCKS.
//
// go-mysql-server v0.20.0 has its own (sql.LockSubsystem), but a waiting
// GET_LOCK there spins on time.Sleep in wall time, and it would wait
// holding the fake's server-wide statement lock. The fake's functions
// replace it: they are found first because the database provider the
// engine is given answers for them (go-mysql-server asks the provider for
// a function before its built-ins). A GET_LOCK that must wait lets other
// connections' statements run, and waits on channels only: the grant, a
// timer of the server's clock (FollowClock's, or the system's), the end of
// the client's connection, and the end of the statement's context.

// mysqlNamedLocks is the table of named locks of one in-process server.
type mysqlNamedLocks struct {
	serial *serialHandler // whose statement lock a waiting GET_LOCK lets go

	mu    sync.Mutex
	clock locks.Clock
	held  map[string]*namedLock      // by lower-cased name; present only while held
	gone  map[uint32]<-chan struct{} // each connection's end (closed when its client goes)
	// changed is closed and replaced whenever a queue of waiters changes
	// (awaitWaiters).
	changed chan struct{}
}

// namedLock is a held named lock: its session (connection id), how many
// times that session took it, and the sessions waiting for it, first come
// first served.
type namedLock struct {
	owner   uint32
	count   int64
	waiters []*namedWaiter
}

// namedWaiter is a session in GET_LOCK; granted is closed when the lock
// is handed to it.
type namedWaiter struct {
	conn    uint32
	granted chan struct{}
}

func newMySQLNamedLocks(serial *serialHandler) *mysqlNamedLocks {
	return &mysqlNamedLocks{
		serial:  serial,
		clock:   locks.SystemClock{},
		held:    map[string]*namedLock{},
		gone:    map[uint32]<-chan struct{}{},
		changed: make(chan struct{}),
	}
}

// setClock makes GET_LOCK's timeouts run on clock.
func (n *mysqlNamedLocks) setClock(clock locks.Clock) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.clock = clock
}

// connected records the channel closed when connection conn's client goes.
func (n *mysqlNamedLocks) connected(conn uint32, gone <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.gone[conn] = gone
}

// disconnected releases every lock of connection conn, as MySQL does when
// a session ends, and forgets the connection.
func (n *mysqlNamedLocks) disconnected(conn uint32) {
	n.releaseAll(conn)
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.gone, conn)
}

// errMySQLClientGone ends a GET_LOCK whose client closed its connection.
var errMySQLClientGone = errors.New("mysqlfake: the client closed its connection while GET_LOCK waited")

// get is GET_LOCK(name, timeout) for connection conn: 1 once held, 0 when
// the timeout passed first, NULL when the statement was killed. A negative
// timeout waits for ever, 0 tries once.
func (n *mysqlNamedLocks) get(ctx *gmssql.Context, conn uint32, name string, timeout time.Duration) (any, error) {
	n.mu.Lock()
	l := n.held[name]
	switch {
	case l == nil:
		n.held[name] = &namedLock{owner: conn, count: 1}
		n.mu.Unlock()
		return int64(1), nil
	case l.owner == conn:
		l.count++
		n.mu.Unlock()
		return int64(1), nil
	case timeout == 0:
		n.mu.Unlock()
		return int64(0), nil
	}
	w := &namedWaiter{conn: conn, granted: make(chan struct{})}
	l.waiters = append(l.waiters, w)
	n.changedLocked()
	var expired <-chan time.Time
	if timeout > 0 {
		timer := n.clock.NewTimer(timeout)
		defer timer.Stop()
		expired = timer.C()
	}
	gone := n.gone[conn]
	n.mu.Unlock()

	resume := n.serial.pause(conn)
	var cause error
	select {
	case <-w.granted:
	case <-expired:
	case <-gone:
		cause = errMySQLClientGone
	case <-ctx.Done():
		cause = ctx.Err()
	}
	granted := n.leave(name, w)
	resume()
	switch {
	case granted:
		return int64(1), nil
	case cause == errMySQLClientGone:
		return nil, cause
	case cause != nil:
		return nil, nil // killed: MySQL answers NULL
	}
	return int64(0), nil
}

// leave takes w off the queue of lock name unless it was granted the lock
// meanwhile, and reports whether it was.
func (n *mysqlNamedLocks) leave(name string, w *namedWaiter) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	select {
	case <-w.granted:
		return true
	default:
	}
	if l := n.held[name]; l != nil {
		for i, o := range l.waiters {
			if o == w {
				l.waiters = append(l.waiters[:i:i], l.waiters[i+1:]...)
				n.changedLocked()
				break
			}
		}
	}
	return false
}

// handOffLocked frees lock name, held by l, for the first waiter if there
// is one. The caller holds n.mu.
func (n *mysqlNamedLocks) handOffLocked(name string, l *namedLock) {
	if len(l.waiters) == 0 {
		delete(n.held, name)
		return
	}
	w := l.waiters[0]
	l.waiters = l.waiters[1:]
	l.owner, l.count = w.conn, 1
	close(w.granted)
	n.changedLocked()
}

// changedLocked wakes awaitWaiters. The caller holds n.mu.
func (n *mysqlNamedLocks) changedLocked() {
	close(n.changed)
	n.changed = make(chan struct{})
}

// awaitWaiters blocks until exactly want sessions wait in GET_LOCK, over
// all names, or ctx ends: a test's way to know that a GET_LOCK it started
// waits before it acts.
func (n *mysqlNamedLocks) awaitWaiters(ctx context.Context, want int) error {
	for {
		n.mu.Lock()
		waiting := 0
		for _, l := range n.held {
			waiting += len(l.waiters)
		}
		ch := n.changed
		n.mu.Unlock()
		if waiting == want {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%d sessions wait in GET_LOCK, want %d: %w", waiting, want, ctx.Err())
		}
	}
}

// release is RELEASE_LOCK(name): 1 when conn held it (once less, if it
// took it more than once), 0 when another session holds it, NULL when
// nobody does.
func (n *mysqlNamedLocks) release(conn uint32, name string) any {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.held[name]
	switch {
	case l == nil:
		return nil
	case l.owner != conn:
		return int64(0)
	}
	l.count--
	if l.count == 0 {
		n.handOffLocked(name, l)
	}
	return int64(1)
}

// releaseAll is RELEASE_ALL_LOCKS(): it frees every lock conn holds and
// returns how many times they had been taken (a lock taken twice counts
// two, as in MySQL).
func (n *mysqlNamedLocks) releaseAll(conn uint32) int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	var released int64
	for name, l := range n.held {
		if l.owner == conn {
			released += l.count
			n.handOffLocked(name, l)
		}
	}
	return released
}

// usedBy is IS_USED_LOCK(name): the holder's connection id, or NULL.
func (n *mysqlNamedLocks) usedBy(name string) any {
	n.mu.Lock()
	defer n.mu.Unlock()
	if l := n.held[name]; l != nil {
		return int64(l.owner)
	}
	return nil
}

// isFree is IS_FREE_LOCK(name): 1 when nobody holds it, else 0.
func (n *mysqlNamedLocks) isFree(name string) any {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.held[name] != nil {
		return int64(0)
	}
	return int64(1)
}

// functions returns the SQL functions, by name, that replace
// go-mysql-server's named-lock functions.
func (n *mysqlNamedLocks) functions() map[string]gmssql.Function {
	byName := func(f func(*gmssql.Context, uint32, string) (any, error)) func(*gmssql.Context, []any) (any, error) {
		return func(ctx *gmssql.Context, args []any) (any, error) {
			name, err := lockName(ctx, args[0])
			if err != nil || name == "" {
				return nil, err
			}
			return f(ctx, ctx.Session.ID(), name)
		}
	}
	fns := []*lockFunc{
		{name: "get_lock", arity: 2, eval: func(ctx *gmssql.Context, args []any) (any, error) {
			name, err := lockName(ctx, args[0])
			if err != nil || name == "" || args[1] == nil {
				return nil, err
			}
			timeout, err := lockTimeout(ctx, args[1])
			if err != nil {
				return nil, err
			}
			return n.get(ctx, ctx.Session.ID(), name, timeout)
		}},
		{name: "release_lock", arity: 1, eval: byName(func(_ *gmssql.Context, conn uint32, name string) (any, error) {
			return n.release(conn, name), nil
		})},
		{name: "is_free_lock", arity: 1, eval: byName(func(_ *gmssql.Context, _ uint32, name string) (any, error) {
			return n.isFree(name), nil
		})},
		{name: "is_used_lock", arity: 1, eval: byName(func(_ *gmssql.Context, _ uint32, name string) (any, error) {
			return n.usedBy(name), nil
		})},
		{name: "release_all_locks", arity: 0, eval: func(ctx *gmssql.Context, _ []any) (any, error) {
			return n.releaseAll(ctx.Session.ID()), nil
		}},
	}
	m := make(map[string]gmssql.Function, len(fns))
	for _, f := range fns {
		proto := f
		m[f.name] = gmssql.FunctionN{Name: f.name, Fn: func(args ...gmssql.Expression) (gmssql.Expression, error) {
			if len(args) != proto.arity {
				return nil, gmssql.ErrInvalidArgumentNumber.New(proto.name, proto.arity, len(args))
			}
			e := *proto
			e.args = args
			return &e, nil
		}}
	}
	return m
}

// lockName converts a named-lock function's first argument: "" for NULL
// (the function then answers NULL), lower case (MySQL compares lock names
// without regard to case), and an error for the empty name, as MySQL's
// ER_USER_LOCK_WRONG_NAME.
func lockName(ctx *gmssql.Context, v any) (string, error) {
	if v == nil {
		return "", nil
	}
	s, _, err := types.LongText.Convert(ctx, v)
	if err != nil {
		return "", fmt.Errorf("mysqlfake.New: lock name %v: %w", v, err)
	}
	name, _ := s.(string)
	if name == "" {
		return "", errors.New("mysqlfake.New: incorrect user-level lock name ''")
	}
	return strings.ToLower(name), nil
}

// lockTimeout converts GET_LOCK's timeout, in seconds with any fraction:
// negative waits for ever (-1 here), 0 tries once.
func lockTimeout(ctx *gmssql.Context, v any) (time.Duration, error) {
	f, _, err := types.Float64.Convert(ctx, v)
	if err != nil {
		return 0, fmt.Errorf("mysqlfake.New: GET_LOCK timeout %v: %w", v, err)
	}
	secs, _ := f.(float64)
	switch {
	case secs < 0:
		return -1, nil
	case secs*float64(time.Second) >= math.MaxInt64:
		return math.MaxInt64, nil
	}
	d := time.Duration(math.Round(secs * float64(time.Second)))
	if d == 0 && secs > 0 {
		d = 1
	}
	return d, nil
}

// lockFunc is one call of a named-lock function in a statement.
type lockFunc struct {
	name  string
	arity int
	args  []gmssql.Expression
	eval  func(ctx *gmssql.Context, args []any) (any, error)
}

var (
	_ gmssql.FunctionExpression         = (*lockFunc)(nil)
	_ gmssql.NonDeterministicExpression = (*lockFunc)(nil)
)

// FunctionName returns the function's name.
func (f *lockFunc) FunctionName() string { return f.name }

// Description says what the function is.
func (f *lockFunc) Description() string { return "a MySQL named-lock function of lockproof's fake" }

// IsNonDeterministic is true: the answer depends on other sessions.
func (f *lockFunc) IsNonDeterministic() bool { return true }

// Resolved reports whether every argument is resolved.
func (f *lockFunc) Resolved() bool {
	for _, a := range f.args {
		if !a.Resolved() {
			return false
		}
	}
	return true
}

// String renders the call.
func (f *lockFunc) String() string {
	args := make([]string, len(f.args))
	for i, a := range f.args {
		args[i] = a.String()
	}
	return f.name + "(" + strings.Join(args, ", ") + ")"
}

// Type is BIGINT, as MySQL's.
func (f *lockFunc) Type() gmssql.Type { return types.Int64 }

// IsNullable is true: each may answer NULL.
func (f *lockFunc) IsNullable() bool { return true }

// Children returns the arguments.
func (f *lockFunc) Children() []gmssql.Expression { return f.args }

// WithChildren returns the call with other arguments.
func (f *lockFunc) WithChildren(children ...gmssql.Expression) (gmssql.Expression, error) {
	if len(children) != f.arity {
		return nil, gmssql.ErrInvalidChildrenNumber.New(f, len(children), f.arity)
	}
	e := *f
	e.args = children
	return &e, nil
}

// Eval evaluates the arguments, then the function.
func (f *lockFunc) Eval(ctx *gmssql.Context, row gmssql.Row) (any, error) {
	vals := make([]any, len(f.args))
	for i, a := range f.args {
		v, err := a.Eval(ctx, row)
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	return f.eval(ctx, vals)
}

// mysqlFunctions is the in-process server's database provider with the
// functions it answers for before go-mysql-server's built-ins.
type mysqlFunctions struct {
	*memory.DbProvider
	fns map[string]gmssql.Function
}

// Function returns the fake's own function called name, if there is one.
func (p mysqlFunctions) Function(_ *gmssql.Context, name string) (gmssql.Function, bool) {
	f, ok := p.fns[strings.ToLower(name)]
	return f, ok
}
