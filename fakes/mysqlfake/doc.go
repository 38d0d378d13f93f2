// Package mysqlfake starts MySQL for lockproof's tests and programs:
// go-mysql-server with an in-memory database on a loopback port, running
// one statement at a time, or a private database on a real server chosen
// by At.
//
// Start (a program) and New (a test) give a Server: its DB, more pools
// (OpenDB), ExpireLock, and FollowClock, which makes the in-process
// server's time (NOW(6), GET_LOCK's timeouts) read a manual clock;
// ManualTime starts the server on one, moved by Advance. New reads EnvDSN
// into At unless ForceEmbedded is given. Named locks (GET_LOCK and kin) and
// DO work as in MySQL; a GET_LOCK that waits does not block the others.
//
// Pools connect to the in-process server in memory (Server.DialContext,
// go-sql-driver's DialFunc); the loopback port stays open for other
// clients. Every round trip passes through the locks.Gate of its context
// (GatedConnector).
package mysqlfake
