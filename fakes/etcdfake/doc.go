// Package etcdfake starts etcd for lockproof's tests and programs: the
// embed server of etcd, one member or a cluster of n on loopback ports with
// their data in a temporary directory, or a real cluster chosen by At.
//
// Start and StartCluster (a program) and New and NewCluster (a test) give a
// Server: clients, a key Prefix, LockOptions, RevokeLease and ExpireLock,
// Stop and Restart of one member, and the members' Logs. New reads
// EnvEndpoints into At unless ForceEmbedded is given. etcd's leases run on
// the server's wall clock: there is no manual time, and a test ends a
// lease with ExpireLock instead of waiting for it.
//
// Clients are gated through gRPC interceptors (GateDialOptions,
// GateUnaryInterceptor, GateStreamInterceptor). There is no in-memory
// dialer: embed.StartEtcd makes its client listeners itself from the
// configured URLs and offers no way to hand it a listener, so an in-memory
// connection would need a second gRPC server of our own over the member,
// outside the serving path that etcd tests. The embedded members run in
// real time anyway, which the suite's in-process scheduling does not
// serve. DialContext dials the members' loopback ports, so that a Conns can
// still sever a client (NewClientThrough).
package etcdfake
