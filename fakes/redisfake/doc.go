// Package redisfake starts Redis for lockproof's tests and programs:
// miniredis on a loopback port, or a real server chosen by an option.
//
// Start (a program) and New (a test) give a Server: clients, a key Prefix
// unique to the fake, LockOptions for a lock, Advance in manual time
// (ManualTime), ExpireLock, and Stop and Restart to fail the server.
// StartCluster and NewCluster give Nodes, n independent servers for
// Redlock with one Prefix and one clock. A real server comes from At or
// NodesAt, never from the environment; New and NewCluster read EnvAddr and
// EnvAddrs into those options unless ForceMiniredis is given.
//
// Clients connect to miniredis in memory (Server.DialContext, an
// internal/memnet byte queue; the go-redis Dialer of Client and NewClient),
// so a request in flight is a runnable goroutine, not bytes in the kernel;
// the loopback port stays open for other clients and proxies. Every
// client's commands pass through the locks.Gate of their context (GateHook,
// Gate). miniredis publishes no keyspace notifications: CONFIG SET
// notify-keyspace-events fails with ErrMiniredisNoKeyspaceNotifications.
package redisfake
