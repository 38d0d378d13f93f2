// Package lab starts real multi-node clusters (etcd, ZooKeeper) as
// processes, one member per network namespace, with node controls, for
// tests that need a replicated backend rather than a fake.
//
// The whole lab lives inside a sandbox: a network namespace with only a
// loopback link and no route out, entered by re-running the test binary
// under `unshare --net --mount` (SandboxMain, from TestMain). CheckIsolation
// proves from inside, without sending a packet, that the sandbox has no way
// out, and test code reaches members only through a Dialer that refuses
// any address outside the lab's subnet and loopback before a socket exists.
package lab
