// Package consulfake starts Consul for lockproof's tests and programs:
// miniconsul (package fakes/miniconsul, an in-memory Consul HTTP API on a
// manual or real clock), or a real agent through Consul's sdk/testutil.
//
// Start (a program) and New (a test) give a Server: clients, a key Prefix,
// LockOptions, Advance in manual time (ManualTime), ExpireSession,
// ExpireLock, and WaitBlocked to let a client's blocking query park before
// time moves. A real agent comes from Agent (a consul binary); New uses the
// binary of EnvBin or PATH when ForceAgent is given or ForceMiniconsul is
// not. SessionTTLMultiplier(1) makes miniconsul end a session exactly at
// its TTL (Consul's default: at twice the TTL).
//
// Clients reach miniconsul in memory (Server.DialContext, the transport of
// NewClient); the loopback port stays open for other clients. Their
// requests pass through the locks.Gate of their context (GateTransport).
package consulfake
