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

// The semaphore and the read-write mutex keep their leases in sorted sets,
// each member an owner scored by the end of its lease in µs of the server's
// clock (TIME), and their waiters in a FIFO list, each member
// "<owner> <line id> <ttl µs>" (and, for the read-write mutex, " r" or
// " w"). A waiter is told of a hand-over on its line's channel, the
// recipe's channel prefix and the line's id, as a Locker's waiter is.
//
// Every script takes ARGV owner, ttl µs, channel prefix, the owner's queue
// member ("" when it has none), then its own, and begins with leasePrelude:
// it reads the server's clock and defines
//   - tidy(q, ks), which sets the TTL of each lease set in ks to its
//     longest lease's, and makes queue q live at least three times the
//     longest of the TTL and those leases, so that a waiter's place
//     outlasts the leases it waits behind (each re-check, at the earliest
//     end, renews it). Every script ends with it;
//   - left(ks), the µs until the earliest end of a lease in the sets ks
//     (the TTL when they are empty);
//   - offer(m, k, fk), which grants queue member m a lease in set k with
//     a token from the fencing counter fk and publishes the token on the
//     member's channel. A member nobody listens for (its process crashed)
//     is skipped: offer returns false, leaving a gap in the tokens. The
//     caller's own member is granted without a message: mine is its token;
//   - grant(k), which grants the caller a lease in set k with a token from
//     the fencing counter, KEYS' last, and returns {1, token}.
//
// A release pops waiters only while they can enter, so it wakes exactly
// the waiters it serves: one per freed permit, the writer at the head of
// the queue, or the readers at its head up to the first writer.
const leasePrelude = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttl = tonumber(ARGV[2])
local mine = false
local function tidy(q, ks)
  local d = ttl
  for _, k in ipairs(ks) do
    local l = redis.call('ZRANGE', k, -1, -1, 'WITHSCORES')
    if l[2] then
      local e = tonumber(l[2]) - now
      redis.call('PEXPIRE', k, math.ceil(e / 1000))
      d = math.max(d, e)
    end
  end
  d = math.ceil(3 * d / 1000)
  if redis.call('PTTL', q) < d then redis.call('PEXPIRE', q, d) end
end
local function left(ks)
  local e = false
  for _, k in ipairs(ks) do
    local f = redis.call('ZRANGE', k, 0, 0, 'WITHSCORES')
    if f[2] and (not e or tonumber(f[2]) < e) then e = tonumber(f[2]) end
  end
  if e then return e - now end
  return ttl
end
local function offer(m, k, fk)
  local o, id, d = string.match(m, '^(%S+) (%S+) (%d+)')
  if not o then return false end
  local f = redis.call('INCR', fk)
  if o == ARGV[1] then
    mine = f
  elseif redis.call('PUBLISH', ARGV[3] .. id, o .. ' ' .. f) == 0 then
    return false
  end
  redis.call('ZADD', k, now + tonumber(d), o)
  return true
end
local function grant(k)
  local f = redis.call('INCR', KEYS[#KEYS])
  redis.call('ZADD', k, now + ttl, ARGV[1])
  return {1, f}
end
`

// The semaphore's keys (see Semaphore), under the lock's hash tag:
//
//	KEYS[1] <prefix>{<name>}:sem        sorted set of the permits' leases
//	KEYS[2] <prefix>{<name>}:sem:queue  FIFO of the waiters
//	KEYS[3] <prefix>{<name>}:sem:fence  fencing counter, never deleted: INCR on every grant
//
// semPrelude follows leasePrelude: it drops the permits whose lease has
// ended (so no expired permit is ever counted, renewed or released) and
// defines serve(), which hands the free permits (ARGV[5] in all) to the
// waiters at the head of the queue, and done(r), which tidies and
// returns r.
const semPrelude = leasePrelude + `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local permits = tonumber(ARGV[5])
local function serve()
  local n = redis.call('ZCARD', KEYS[1])
  while n < permits do
    local m = redis.call('LPOP', KEYS[2])
    if not m then return end
    if offer(m, KEYS[1], KEYS[3]) then n = n + 1 end
  end
end
local function done(r)
  tidy(KEYS[2], {KEYS[1]})
  return r
end
`

// acquireSemScript takes a permit for ARGV[1]: after serving the queue,
// the caller is granted when it was served (or had been handed a permit
// before this look, which is granted again with a new token and a full
// TTL: the message that carried the old token is never used), or when a
// permit is still free, which leaves nobody queued. ARGV[6] = "1" (Lock)
// queues a refused caller, or keeps it queued. ARGV: owner, ttl µs,
// channel prefix, member, permits, waiting. Returns {1, fence} when
// granted, {0, µs until the earliest permit ends} when not.
var acquireSemScript = redis.NewScript(semPrelude + `
serve()
if mine then return done({1, mine}) end
if redis.call('ZSCORE', KEYS[1], ARGV[1]) or redis.call('ZCARD', KEYS[1]) < permits then
  return done(grant(KEYS[1]))
end
if ARGV[6] == '1' and not redis.call('LPOS', KEYS[2], ARGV[4]) then
  redis.call('RPUSH', KEYS[2], ARGV[4])
end
return done({0, left({KEYS[1]})})
`)

// renewSemScript extends ARGV[1]'s permit to a full TTL from now, if it
// still holds one. ARGV: owner, ttl µs, channel prefix, "", permits.
// Returns 1, or 0 when it holds none.
var renewSemScript = redis.NewScript(semPrelude + `
serve()
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return done(0) end
redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[1])
return done(1)
`)

// releaseSemScript takes ARGV[4] out of the queue (when not ""), gives
// back ARGV[1]'s permit, and serves the queue with the permits that this
// or the pruning freed. ARGV: owner, ttl µs, channel prefix, member,
// permits. Returns 1 when ARGV[1] held a permit, else 0.
var releaseSemScript = redis.NewScript(semPrelude + `
if ARGV[4] ~= '' then redis.call('LREM', KEYS[2], 0, ARGV[4]) end
local n = redis.call('ZREM', KEYS[1], ARGV[1])
serve()
return done(n)
`)

// The read-write mutex's keys (see RWMutex and RWKeys), under the lock's
// hash tag:
//
//	KEYS[1] <prefix>{<name>}:rw:r      sorted set of the readers' leases
//	KEYS[2] <prefix>{<name>}:rw:w      the same for the writer: one member at most
//	KEYS[3] <prefix>{<name>}:rw:q      FIFO of the waiters, readers and writers
//	KEYS[4] <prefix>{<name>}:rw:fence  fencing counter of readers and writers alike, never deleted
//
// rwPrelude follows leasePrelude: it drops the leases that have ended and
// defines serve(), which hands the lock to the waiters at the head of the
// queue while they can enter (a writer when nobody holds it, readers
// while no writer does), and done(r), which tidies and returns r.
const rwPrelude = leasePrelude + `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local function serve()
  local readers = redis.call('EXISTS', KEYS[1]) == 1
  if redis.call('EXISTS', KEYS[2]) == 1 then return end
  while true do
    local m = redis.call('LINDEX', KEYS[3], 0)
    if not m then return end
    local w = string.sub(m, -1) == 'w'
    if w and readers then return end
    redis.call('LPOP', KEYS[3])
    if w then
      if offer(m, KEYS[2], KEYS[4]) then return end
    elseif offer(m, KEYS[1], KEYS[4]) then
      readers = true
    end
  end
end
local function done(r)
  tidy(KEYS[3], {KEYS[1], KEYS[2]})
  return r
end
`

// acquireRWScript takes a lease for ARGV[1] in mode ARGV[5] ("r" or "w").
// After serving the queue, the caller is granted when it was served (or
// had been handed the lease before this look: granted again, as the
// semaphore's), or when it can enter past everyone: a writer when nobody
// holds the lock (the queue is then empty), a reader when no writer holds
// it and nobody waits (so that a waiting writer is not starved by readers
// who keep overlapping). ARGV[6] = "1" (Lock) queues a refused caller, or
// keeps it queued. ARGV: owner, ttl µs, channel prefix, member, mode,
// waiting. Returns {1, fence} when granted, {0, µs until the earliest
// lease ends} when not.
var acquireRWScript = redis.NewScript(rwPrelude + `
serve()
if mine then return done({1, mine}) end
local k = KEYS[1]
local free
if ARGV[5] == 'w' then
  k = KEYS[2]
  free = redis.call('EXISTS', KEYS[1], KEYS[2]) == 0
else
  free = redis.call('EXISTS', KEYS[2], KEYS[3]) == 0
end
if free or redis.call('ZSCORE', k, ARGV[1]) then return done(grant(k)) end
if ARGV[6] == '1' and not redis.call('LPOS', KEYS[3], ARGV[4]) then
  redis.call('RPUSH', KEYS[3], ARGV[4])
end
return done({0, left({KEYS[1], KEYS[2]})})
`)

// renewRWScript extends ARGV[1]'s lease in KEYS[ARGV[5]] (1 reader, 2
// writer) to a full TTL from now, if it still holds it. ARGV: owner, ttl
// µs, channel prefix, "", set. Returns 1, or 0 when it holds none.
var renewRWScript = redis.NewScript(rwPrelude + `
serve()
local k = KEYS[tonumber(ARGV[5])]
if not redis.call('ZSCORE', k, ARGV[1]) then return done(0) end
redis.call('ZADD', k, 'XX', now + ttl, ARGV[1])
return done(1)
`)

// releaseRWScript takes ARGV[4] out of the queue (when not ""), removes
// ARGV[1]'s lease from KEYS[ARGV[5]] (1 reader, 2 writer), and serves the
// queue. ARGV: owner, ttl µs, channel prefix, member, set. Returns 1 when
// ARGV[1] held the lease, else 0.
var releaseRWScript = redis.NewScript(rwPrelude + `
if ARGV[4] ~= '' then redis.call('LREM', KEYS[3], 0, ARGV[4]) end
local n = redis.call('ZREM', KEYS[tonumber(ARGV[5])], ARGV[1])
serve()
return done(n)
`)
