package clusters

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes/lab"
	"github.com/lockproof/lockproof/fakes/mysqlfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/mysqllock"
	"github.com/lockproof/lockproof/propertytest"
)

// GaleraSkew is how far the skew fault sets the skewed member's clock
// ahead: more than GaleraOptions' TTL, so that every lease another member
// granted looks expired there at once.
const GaleraSkew = 5 * time.Second

// galeraStartTimeout bounds a Galera cluster's start in a test: the
// system tables, a bootstrap of the template, then three members that
// join one after the other by state transfer. 8 to 11 s on an idle
// machine; 40 to 58 s measured with five other engineers' clusters and a
// CI run on the same 2 cores, so startTimeout's minute is too tight.
const galeraStartTimeout = 3 * time.Minute

// skewedMember is the Galera member whose clock the fault skews.
const skewedMember = 2

// galeraDatabase holds the runs' lock tables.
const galeraDatabase = "lockproof"

// GaleraCluster is a lab MariaDB Galera cluster of 3 nodes shared by the
// runs of one test, member 2 under libfaketime with its clock true until
// the fault skews it; each run keeps its locks in a table of its own.
type GaleraCluster struct {
	*lab.Galera
	runs atomic.Int64
}

// GaleraUnavailable says why StartGalera cannot run here, or "": the
// lab's reasons, or libfaketime missing.
func GaleraUnavailable() string {
	if reason := lab.GaleraUnavailable(); reason != "" {
		return reason
	}
	if _, err := os.Stat(lab.FakeTimeLibrary); err != nil {
		return fmt.Sprintf("no clock skew (apt-get install faketime): %v", err)
	}
	return ""
}

// Galera starts a Galera cluster in the lab for t and closes it at t's
// cleanup; it skips and fails t as Etcd does.
func Galera(t testing.TB) *GaleraCluster {
	t.Helper()
	return forTest(t, GaleraUnavailable(), "Galera cluster", galeraStartTimeout, StartGalera)
}

// StartGalera starts a 3-node Galera cluster in the lab (see
// lab.StartGalera), member 2 under libfaketime, and creates the database
// of the runs' tables; logging through logf (nil: nowhere). Close ends
// it. The caller must run in the lab's sandbox.
func StartGalera(ctx context.Context, logf func(format string, args ...any)) (*GaleraCluster, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	began := time.Now()
	g, err := lab.StartGalera(ctx, lab.GaleraOptions{Options: lab.Options{Logf: logf},
		Skew: map[int]time.Duration{skewedMember: 0}})
	if err != nil {
		return nil, fmt.Errorf("clusters: %w", err)
	}
	db, err := g.DB(0)
	if err == nil {
		_, err = db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+galeraDatabase)
		_ = db.Close() // a pool of one statement: nothing left to fail
	}
	if err != nil {
		_ = g.Close() // the error that matters is the one returned
		return nil, fmt.Errorf("clusters: the runs' database: %w", err)
	}
	logf("clusters: 3 Galera nodes synced in %v", time.Since(began).Round(time.Millisecond))
	return &GaleraCluster{Galera: g}, nil
}

// GaleraOptions are the Options to run MySQLLock with: TTL 4s (less than
// GaleraSkew, and long enough that a lease still runs when the fault has
// skewed the clock for another client's acquisition: each SetSkew takes up
// to 2s), Slack 1s, Settle 50ms. Claims: the defaults (crash and
// pause): mysqllock does not claim a skewed clock, which its NOW()-based
// leases trust.
func GaleraOptions() propertytest.Options {
	return propertytest.Options{TTL: 4 * time.Second, Slack: time.Second, Settle: 50 * time.Millisecond}
}

// MySQLLock is the Factory of mysqllock on the Galera cluster: each
// locker of a run talks to one member only (memberOf), through a gated pool that
// dials through the lab's Dialer. Its sessions wait for causality
// (wsrep_sync_wait=3: reads, updates and deletes see what the cluster
// committed before), as a Galera deployment that reads across nodes
// should: without it, a member that has not applied a release yet may
// refuse a free lock, which the suite would count against progress (not
// measured). Safety does not rest on it: Galera's certification aborts a
// grant made on a stale row (a deadlock error, which mysqllock retries). Each run's lock table is
// a table of its own, dropped at its end.
//
// One fault, of kind FaultClockSkew (which mysqllock does not claim),
// struck around acquisitions too (AtAcquire): Inject sets member 2's clock
// GaleraSkew ahead, Heal sets it true again.
// mysqllock computes every expiry from the server's NOW(6), and Galera
// replicates the row images (expires_at as a value): a lease granted on
// member 0 or 1 expires on member 2's clock GaleraSkew early, so a client
// of member 2 takes over the lock while its holder, on its own deadline,
// still holds it: two holders. A lease granted on member 2 lasts
// GaleraSkew longer for the others, even after the Heal. Recovery is 0:
// no node fault.
func (g *GaleraCluster) MySQLLock() propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		table := fmt.Sprintf("lockproof_run_%d", g.runs.Add(1))
		ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
		defer cancel()
		// A run that ended with the fault on leaves the clock skewed.
		if err := g.SetSkew(ctx, skewedMember, 0); err != nil {
			return nil, fmt.Errorf("clusters: %w", err)
		}
		admin, err := g.open(0)
		if err != nil {
			return nil, err
		}
		if err := mysqllock.CreateTable(ctx, admin, table); err != nil {
			_ = admin.Close() // the error that matters is the one returned
			return nil, fmt.Errorf("clusters: %w", err)
		}
		var mu sync.Mutex
		var pools []*sql.DB
		lockers := 0
		env.Cleanup(func() {
			mu.Lock()
			defer mu.Unlock()
			for _, db := range pools {
				_ = db.Close() // fails only for a pool closed already
			}
			ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
			defer cancel()
			if _, err := admin.ExecContext(ctx, "DROP TABLE IF EXISTS `"+table+"`"); err != nil {
				env.Logf("clusters: dropping %s: %v", table, err)
			}
			_ = admin.Close() // nothing left in it to fail
		})
		be := &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				mu.Lock()
				member := memberOf(lockers)
				lockers++
				mu.Unlock()
				db, err := g.open(member)
				if err != nil {
					return nil, err
				}
				mu.Lock()
				pools = append(pools, db)
				mu.Unlock()
				own := []locks.Option{locks.WithPrefix(table), locks.WithClock(locks.SystemClock{})}
				return mysqllock.New(db, name, append(own, opts...)...)
			},
			Faults: []propertytest.Fault{g.skew(env)},
		}
		realTime(be)
		return be, nil
	}
}

// memberOf is the member the i-th locker of a run talks to: every other
// locker the skewed member 2, the others members 0 and 1 in turn. A
// skewed clock breaks the lock only when its member serves an acquisition
// while another client holds a lease granted on a true clock: with one
// client a member, a third of such acquisitions went there.
func memberOf(i int) int {
	if i%2 == 0 {
		return skewedMember
	}
	return (i / 2) % 2
}

// open is a gated pool on member i's runs' database, its sessions waiting
// for causality (see MySQLLock).
func (g *GaleraCluster) open(i int) (*sql.DB, error) {
	cfg := g.Config(i)
	cfg.DBName = galeraDatabase
	cfg.Params = map[string]string{"wsrep_sync_wait": "3"}
	connector, err := mysqlfake.GatedConnectorFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("clusters: Galera member %d: %w", i, err)
	}
	return sql.OpenDB(connector), nil
}

// skew is MySQLLock's fault; see there.
func (g *GaleraCluster) skew(env propertytest.Env) propertytest.Fault {
	set := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
		defer cancel()
		if err := g.SetSkew(ctx, skewedMember, d); err != nil {
			return fmt.Errorf("clusters: %w", err)
		}
		env.Logf("clusters: Galera member %d's clock %v off", skewedMember, d)
		return nil
	}
	return propertytest.Fault{
		Name: fmt.Sprintf("member %d's clock %v ahead (galera)", skewedMember, GaleraSkew), Kind: propertytest.FaultClockSkew,
		AtAcquire: true, StrikeWhen: propertytest.StrikeHeld, // a holder's lease ends early on member 2's clock
		Inject: func() error { return set(GaleraSkew) },
		Heal:   func() error { return set(0) },
	}
}
