// Package zkfake starts ZooKeeper for lockproof's tests and programs:
// minizk (package fakes/minizk, an in-process ZooKeeper on the real wire
// protocol, on a manual or real clock), or a real server chosen by At.
//
// Start (a program) and New (a test) give a Server: go-zookeeper clients
// (Connect), a node Prefix, LockOptions, Advance and AdvanceTime in manual
// time (ManualTime), TickTime, ExpireSession, ExpireLock, and minizk's own
// controls (DropConnections, Pause, Restart). New reads EnvAddr into At
// unless ForceMinizk is given. go-zookeeper's requests take no context, so
// its clients are not gated.
//
// Clients reach minizk in memory (Server.DialContext through
// go-zookeeper's WithDialer); the loopback port stays open for other
// clients.
package zkfake
