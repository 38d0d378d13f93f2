package redislock

import "github.com/redis/go-redis/v9"

// The lock's keys, all under one hash tag so that they share a cluster slot:
//
//	KEYS[1] <prefix>{<name>}          the lock: value = owner, PX = TTL
//	KEYS[2] <prefix>{<name>}:fence    fencing counter, never deleted: INCR on every grant
//	                                  (and on every first attempt, won or not)
//	KEYS[3] <prefix>{<name>}:queue    FIFO of waiters, "<owner> <locker id> <ttl ms>"
//
// A waiter is notified on its Locker's channel, <prefix>{<name>}:w:<locker id>.

// The common paths of an acquisition are plain pipelines, not scripts (see
// try and enqueue in redislock.go, which say why they need no atomicity): a
// first attempt is SET NX PX + INCR of the fence, and joining the queue is
// one RPUSH. Scripts are kept for what needs a decision on the server:
// a waiter's re-check, the release with its hand-over, and the renewal.

// recheckScript is a waiter's look at the lock after a wake-up without a
// hand-over: its timer ran out, or its subscription was re-established.
// It takes the lock if it is free (leaving the queue), reports a hand-over
// that already happened, or makes sure the waiter is still queued.
// ARGV: owner, ttl ms, queue member, queue TTL ms. The queue lives at least
// that long and three times the holder's remaining TTL, so that waiters
// whose own TTL is short do not lose their places behind a holder with a
// long one.
// Returns {1, fence} when it took the lock now, {2, fence, pttl} when the lock
// was already handed to this owner, {0, pttl} when someone else holds it.
var recheckScript = redis.NewScript(`
local p = redis.call('PTTL', KEYS[1])
if p == -2 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  local f = redis.call('INCR', KEYS[2])
  redis.call('LREM', KEYS[3], 0, ARGV[3])
  return {1, f}
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return {2, tonumber(redis.call('GET', KEYS[2])), p}
end
if not redis.call('LPOS', KEYS[3], ARGV[3]) then
  redis.call('RPUSH', KEYS[3], ARGV[3])
end
redis.call('PEXPIRE', KEYS[3], math.max(tonumber(ARGV[4]), 3 * p))
return {0, p}
`)

// releaseScript releases the lock if ARGV[1] owns it and hands it straight to
// the first waiter in the queue that is still listening: PUBLISH returns the
// number of receivers, so a waiter whose Locker has gone (a crashed process)
// is skipped instead of being granted a lock it will never use. The queue
// then lives three of the new holder's TTLs (it disappears by itself once
// empty); waiters that wait longer than that, behind a holder that keeps
// renewing, put it back in their re-checks.
// ARGV: owner, channel prefix, queue member to remove first ("" for none).
// Returns 0 when ARGV[1] did not hold the lock, 1 when it was freed, 2 when it
// was handed over.
var releaseScript = redis.NewScript(`
if ARGV[3] ~= '' then redis.call('LREM', KEYS[3], 0, ARGV[3]) end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
while true do
  local m = redis.call('LPOP', KEYS[3])
  if not m then
    redis.call('DEL', KEYS[1])
    return 1
  end
  local o, id, ttl = string.match(m, '^(%S+) (%S+) (%d+)$')
  if o then
    local f = redis.call('INCR', KEYS[2])
    if redis.call('PUBLISH', ARGV[2] .. id, o .. ' ' .. f) > 0 then
      redis.call('SET', KEYS[1], o, 'PX', ttl)
      redis.call('PEXPIRE', KEYS[3], 3 * ttl)
      return 2
    end
  end
end
`)

// renewScript extends the lock to ARGV[2] ms if ARGV[1] owns it.
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// The semaphore's keys (see Semaphore), under the same hash tag:
//
//	KEYS[1] <prefix>{<name>}:sem        sorted set: member = owner, score = end of its lease (µs, server TIME)
//	KEYS[2] <prefix>{<name>}:sem:fence  fencing counter, never deleted: INCR on every grant
//
// Each script reads the server's clock and first drops the permits whose
// lease has ended (score <= now): no expired permit is ever counted,
// renewed or released. After a write the set's TTL is that of its longest
// permit, so that an abandoned semaphore leaves nothing behind.

// acquireSemScript takes a permit for ARGV[1] if fewer than ARGV[3] are
// held. ARGV: owner, ttl µs, permits. Returns {1, fence} when taken, {0,
// µs until the earliest permit ends} when all are held.
var acquireSemScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, tonumber(first[2]) - now}
end
local f = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[1], math.ceil((tonumber(last[2]) - now) / 1000))
return {1, f}
`)

// renewSemScript extends ARGV[1]'s permit to ARGV[2] µs from now, if it
// still holds one. Returns 1, or 0 when it holds none.
var renewSemScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[1], math.ceil((tonumber(last[2]) - now) / 1000))
return 1
`)

// releaseSemScript gives back ARGV[1]'s permit and, when that or the
// pruning freed any, publishes on ARGV[2] so that waiters try again.
// Returns 1 when ARGV[1] held a permit, else 0.
var releaseSemScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local freed = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local n = redis.call('ZREM', KEYS[1], ARGV[1])
if n + freed > 0 then redis.call('PUBLISH', ARGV[2], n + freed) end
return n
`)
