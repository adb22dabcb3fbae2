"""What a shard writes to its job's frontier: the requests it found and the requests it is done with (one commit),
the items it wrote ahead and then stored, and the orphaned items of dead shards it adopts.

Each script first compares the frontier's epoch (runtime.frontier.leases) with the shard's and writes nothing when
they differ: a shard working from a frontier Redis lost must not rebuild half of one for the next attempt to trust.
It answers -1 (ENDED) when the job has ended meanwhile (another shard ended it: timeout, cancel), else -2 (LOST).
"""

from __future__ import annotations

from runtime.frontier.layout import QUEUE_LIB

# KEYS: seen (the old layout's), queue (the old layout's), seq, wal, inflight, members, shards, epoch, ended, delayed,
# delayed scores, chunks, chunk data, queued, seen buckets (runtime.frontier.layout), last commit. ARGV: ttl ms, me,
# k, epoch, token ('' = none), n, then n requests as (fingerprint ('' = do not filter), score, delay ms, payload), then
# m, m items, then the members of the requests done. In this order: queue each request unless its fingerprint was
# seen (one with a delay waits in `delayed`, scored by when it is due, its priority kept in `delayed scores`: a page
# the site refused, sent back by throttling/requeue.py), write the items ahead, take the done requests out of flight,
# move the delayed requests that are due into the queue, and take up to k of the most urgent queued requests into
# flight (`members` names every shard that ever held one, so the job's end finds all their keys) — unless this shard
# no longer holds a lease: a shard that was reclaimed (a late commit of a warm shutdown, say) must not take requests
# nobody would reclaim again. Returns {1 (queued) or 0 (seen) for each request, the requests taken, the queue's
# length, the delayed requests, ms until the next of them is due (-1: none)}, or ENDED / LOST without writing anything.
# A commit whose reply was lost (Redis restarted, a connection cut) is sent again with the same token: the reply
# recorded in `last commit` (this shard's, for its latest commit) is returned and nothing is applied twice.
COMMIT = (
    QUEUE_LIB
    + """
if redis.call('GET', KEYS[8]) ~= ARGV[4] then return redis.call('EXISTS', KEYS[9]) == 1 and -1 or -2 end
local token = ARGV[5]
if token ~= '' then
  local recorded = redis.call('GET', KEYS[16])
  if recorded and string.sub(recorded, 1, #token) == token then
    return cmsgpack.unpack(string.sub(recorded, #token + 1))
  end
end
local q = layout(KEYS[3], KEYS[12], KEYS[13], KEYS[14], KEYS[2], KEYS[15], KEYS[1])
local ttl, me, k, n = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[6])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local queued, at, delayed, to_queue = {}, 7, 0, {}
for r = 1, n do
  local fingerprint = ARGV[at]
  if fingerprint ~= '' and not seen_add(q, fingerprint) then
    queued[r] = 0
  else
    local delay = tonumber(ARGV[at + 2])
    if delay > 0 then
      local member = struct.pack('>I8', redis.call('INCR', KEYS[3])) .. ARGV[at + 3]
      redis.call('ZADD', KEYS[10], now + delay, member)
      redis.call('HSET', KEYS[11], member, ARGV[at + 1])
      delayed = delayed + 1
    else
      to_queue[#to_queue + 1] = {ARGV[at + 1], ARGV[at + 3]}
    end
    queued[r] = 1
  end
  at = at + 4
end
enqueue_all(q, to_queue)
if n > 0 then
  for _, i in ipairs({3, 12, 13, 14, 15}) do redis.call('PEXPIRE', KEYS[i], ttl) end
end
if delayed > 0 then
  redis.call('PEXPIRE', KEYS[10], ttl)
  redis.call('PEXPIRE', KEYS[11], ttl)
end
local m = tonumber(ARGV[at])
at = at + 1
for i = at, at + m - 1, 1000 do
  redis.call('RPUSH', KEYS[4], unpack(ARGV, i, math.min(i + 999, at + m - 1)))
end
if m > 0 then redis.call('PEXPIRE', KEYS[4], ttl) end
at = at + m
for i = at, #ARGV, 1000 do
  redis.call('HDEL', KEYS[5], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
local due = redis.call('ZRANGEBYSCORE', KEYS[10], '-inf', now, 'LIMIT', 0, 1000)
for _, member in ipairs(due) do
  enqueue_front(q, redis.call('HGET', KEYS[11], member) or 0, string.sub(member, 9))
end
if #due > 0 then
  redis.call('ZREM', KEYS[10], unpack(due))
  redis.call('HDEL', KEYS[11], unpack(due))
  for _, i in ipairs({3, 12, 13, 14}) do redis.call('PEXPIRE', KEYS[i], ttl) end
end
local taken = {}
if k > 0 and redis.call('ZSCORE', KEYS[7], me) then
  for _, request in ipairs(take(q, k)) do
    local member = struct.pack('>I8', redis.call('INCR', KEYS[3])) .. request[2]
    redis.call('HSET', KEYS[5], member, request[1])
    taken[#taken + 1] = member
  end
  if #taken > 0 then
    redis.call('PEXPIRE', KEYS[5], ttl)
    redis.call('SADD', KEYS[6], me)
    redis.call('PEXPIRE', KEYS[6], ttl)
  end
end
local next_due = redis.call('ZRANGE', KEYS[10], 0, 0, 'WITHSCORES')
local wait = -1
if #next_due > 0 then wait = math.max(0, tonumber(next_due[2]) - now) end
local reply = {queued, taken, queued_count(q), redis.call('ZCARD', KEYS[10]), wait}
if token ~= '' then  -- `members` names the shard, so the job's end finds its key
  redis.call('SET', KEYS[16], token .. cmsgpack.pack(reply), 'PX', ttl)
  redis.call('SADD', KEYS[6], me)
  redis.call('PEXPIRE', KEYS[6], ttl)
end
return reply
"""
)

# KEYS: wal, walstored, progress, epoch, ended. ARGV: count, me, progress JSON ('' = none), ttl ms, epoch. `count`
# more written-ahead items are stored: drop them from the log (those not written yet are dropped when they are),
# record the stats. ENDED / LOST without writing anything.
STORED = """
if redis.call('GET', KEYS[4]) ~= ARGV[5] then return redis.call('EXISTS', KEYS[5]) == 1 and -1 or -2 end
local pending = tonumber(redis.call('GET', KEYS[2]) or '0') + tonumber(ARGV[1])
local trimmed = math.min(pending, redis.call('LLEN', KEYS[1]))
if trimmed > 0 then redis.call('LTRIM', KEYS[1], trimmed, -1) end
redis.call('SET', KEYS[2], pending - trimmed, 'PX', ARGV[4])
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
end
return trimmed
"""

# KEYS: orphans, adopting, epoch. ARGV: count, ttl ms, epoch. Takes up to `count` orphaned items into this shard's
# `adopting` list (orphans again if this shard dies before storing them).
ADOPT = """
if redis.call('GET', KEYS[3]) ~= ARGV[3] then return {} end
local items = redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
if #items == 0 then return {} end
redis.call('LTRIM', KEYS[1], #items, -1)
for i = 1, #items, 1000 do redis.call('RPUSH', KEYS[2], unpack(items, i, math.min(i + 999, #items))) end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return items
"""

# KEYS: seen (the old layout's), seen buckets, epoch, ended. ARGV: fingerprint, ttl ms, epoch. Adds a fingerprint to
# the seen-set: 1 if it was there already, else 0; ENDED / LOST without writing anything.
SEEN = (
    QUEUE_LIB
    + """
if redis.call('GET', KEYS[3]) ~= ARGV[3] then return redis.call('EXISTS', KEYS[4]) == 1 and -1 or -2 end
local q = layout(nil, nil, nil, nil, nil, KEYS[2], KEYS[1])
local added = seen_add(q, ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return added and 0 or 1
"""
)
