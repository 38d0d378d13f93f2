// Package mysqllock is a fenced lock kept in a table of a MySQL or MariaDB
// database, through database/sql (tested with github.com/go-sql-driver/mysql,
// whose error numbers it reads).
//
// Each lock name is one row of the lock table, created by CreateTable:
//
//	CREATE TABLE IF NOT EXISTS lockproof_locks (
//	  name       VARBINARY(256)  NOT NULL PRIMARY KEY,
//	  owner      VARCHAR(64)     NOT NULL DEFAULT '',
//	  fence      BIGINT UNSIGNED NOT NULL,
//	  expires_at DATETIME(6)     NOT NULL
//	)
//
// The row is created by the first grant and never deleted: release empties
// owner and keeps fence, so the fencing token grows across releases and
// expiries. Do not delete rows by hand while any lease may be live.
//
// Operations, each an autocommitted statement (there are no multi-statement
// transactions to lose half of):
//
//   - acquire: UPDATE ... SET owner, fence = fence + 1, expires_at WHERE the
//     row is free (empty owner) or expired; on the first use of a name, INSERT.
//     Then one SELECT reads the owner, the fence and the time left. Owners
//     are random (128 bits from crypto/rand, one per acquisition), so the
//     read also settles a statement whose reply was lost.
//   - renew: UPDATE expires_at WHERE owner is ours and not expired.
//   - unlock: UPDATE to an empty owner WHERE owner is ours.
//
// Zero rows affected by renew or unlock is locks.ErrNotHeld, never a silent
// success. Every time is the database server's NOW(6), never the client's
// clock; the client keeps its own conservative deadline (request sent + TTL
// − drift) and closes Done() by it.
//
// MySQL cannot notify a waiter, so a waiting Lock polls, but never on a
// fixed period: a jittered backoff from 2 ms doubling to 250 ms (or TTL/10 if
// less), cut short to the holder's remaining time as the read reported it.
//
// Errors: a deadlock (1213) or lock wait timeout (1205) is retried a few
// times, then reported, like a lost connection, wrapped in ErrTransient with
// the driver's error still in the chain. None is ever reported as held or as
// locks.ErrLocked.
//
// What it does not survive: a failover to an asynchronous replica that had
// not yet received the latest grant, which may grant the lock again with a
// token already used (a locks.Fence then refuses one of the writers, but the
// double grant happens). Semi-synchronous or group replication avoids that.
package mysqllock
