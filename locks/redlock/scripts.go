package redlock

import "github.com/redis/go-redis/v9"

// On every node the lock is one string key, <prefix>{<name>}, whose value is
// the owner of the acquisition (locks.NewOwner) and whose TTL is the lease's.
// Releases are published on <prefix>{<name>}:released with the released
// owner as the message.
//
// Acquiring is not a script but a MULTI/EXEC transaction (see setNX):
// SET NX PX, then GET and PTTL of whatever the key holds, in one atomic step
// and one round trip. The owner-checked steps below need a script.

// releaseScript deletes the key if ARGV[1] owns it and then publishes ARGV[1]
// on the channel ARGV[2]. Returns 1 when it deleted the key, 0 otherwise.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], ARGV[1])
return 1
`)

// renewScript resets the key's TTL to ARGV[2] ms if ARGV[1] owns it.
// Returns 1 when it did, 0 otherwise.
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
`)
