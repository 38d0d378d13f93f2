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

// The read-write mutex's keys (see RWMutex and RWKeys), under the same
// hash tag:
//
//	KEYS[1] <prefix>{<name>}:rw:r      sorted set of the readers: member = owner, score = end of its lease (µs, server TIME)
//	KEYS[2] <prefix>{<name>}:rw:w      the same for the writer: one member at most
//	KEYS[3] <prefix>{<name>}:rw:q      the writers waiting in Lock, "<owner> <ttl µs>", scored by the end of their wait
//	                                   (one TTL, renewed by each attempt)
//	KEYS[4] <prefix>{<name>}:rw:fence  fencing counter of readers and writers alike, never deleted
//
// Every script takes ARGV owner, ttl µs, channel, then its own, and begins
// with rwPrelude: it reads the server's clock, drops the leases and waits
// that have ended (freed counts the leases), and hands a lock nobody
// holds to the waiting writer whose wait ends first (handover), so that
// no reader takes a free lock from under a waiting writer. The writer
// finds the lock its own at its next attempt (woken by the publish, or
// by its timer). It defines left(k), the µs until the earliest end in k
// (false when k is empty), and keep(k), which sets k's TTL to its longest
// member's.
const rwPrelude = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local freed = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) + redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local function left(k)
  local f = redis.call('ZRANGE', k, 0, 0, 'WITHSCORES')
  if f[2] then return tonumber(f[2]) - now end
  return false
end
local function keep(k)
  local l = redis.call('ZRANGE', k, -1, -1, 'WITHSCORES')
  if l[2] then redis.call('PEXPIRE', k, math.ceil((tonumber(l[2]) - now) / 1000)) end
end
local function handover()
  if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then return end
  local m = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if not m then return end
  redis.call('ZREM', KEYS[3], m)
  local o, ttl = string.match(m, '^(%S+) (%d+)$')
  redis.call('INCR', KEYS[4])
  redis.call('ZADD', KEYS[2], now + tonumber(ttl), o)
  keep(KEYS[2])
  redis.call('PUBLISH', ARGV[3], 'w')
end
handover()
`

// acquireRWScript takes a lease for ARGV[1] in mode ARGV[4] ("r" or "w").
// A reader is admitted unless a writer holds the lock or waits for it (so
// that readers who keep overlapping do not starve the writer); a writer
// only when nobody holds it, or when it was handed the lock while it
// waited: it then takes it from now, a full TTL. A writer refused with
// ARGV[5] = "1" (Lock, not TryLock) is put in, or kept in, the waiting set
// for one TTL, and told to look again within half a TTL so that its place
// does not lapse while it waits. ARGV: owner, ttl µs, channel, mode,
// waiting. Returns {1, fence} when granted, {0, µs until it should look
// again}.
var acquireRWScript = redis.NewScript(rwPrelude + `
local ttl = tonumber(ARGV[2])
if ARGV[4] == 'w' and redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  redis.call('ZADD', KEYS[2], 'XX', now + ttl, ARGV[1])
  keep(KEYS[2])
  return {1, tonumber(redis.call('GET', KEYS[4]))}
end
local w = left(KEYS[2])
local r = left(KEYS[1])
if ARGV[4] == 'r' then
  if w then return {0, w} end
  local q = left(KEYS[3])
  if q then return {0, math.min(r, q)} end
else
  local busy = w or r
  if busy then
    if ARGV[5] == '1' then
      redis.call('ZADD', KEYS[3], now + ttl, ARGV[1] .. ' ' .. ARGV[2])
      keep(KEYS[3])
      busy = math.min(busy, math.floor(ttl / 2))
    end
    return {0, busy}
  end
end
local k = KEYS[1]
if ARGV[4] == 'w' then k = KEYS[2] end
local f = redis.call('INCR', KEYS[4])
redis.call('ZADD', k, now + ttl, ARGV[1])
keep(k)
return {1, f}
`)

// renewRWScript extends ARGV[1]'s lease in KEYS[ARGV[4]] (1 reader, 2
// writer) to ARGV[2] µs from now, if it still holds it. Returns 1, or 0
// when it holds none.
var renewRWScript = redis.NewScript(rwPrelude + `
local k = KEYS[tonumber(ARGV[4])]
if not redis.call('ZSCORE', k, ARGV[1]) then return 0 end
redis.call('ZADD', k, 'XX', now + tonumber(ARGV[2]), ARGV[1])
keep(k)
return 1
`)

// releaseRWScript removes ARGV[1]'s lease from KEYS[ARGV[4]] (1 reader, 2
// writer); with ARGV[4] = 3, a writer that stops waiting, its place in the
// wait and a lease handed to it meanwhile. When that or the pruning freed
// anything, it hands the lock over if it is free and publishes on ARGV[3]
// so that waiters look again. Returns 1 when ARGV[1] was there, else 0.
var releaseRWScript = redis.NewScript(rwPrelude + `
local n
if ARGV[4] == '3' then
  n = redis.call('ZREM', KEYS[3], ARGV[1] .. ' ' .. ARGV[2]) + redis.call('ZREM', KEYS[2], ARGV[1])
else
  n = redis.call('ZREM', KEYS[tonumber(ARGV[4])], ARGV[1])
end
if n + freed > 0 then
  handover()
  redis.call('PUBLISH', ARGV[3], n + freed)
end
return n
`)
