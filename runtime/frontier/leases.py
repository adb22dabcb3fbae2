"""Who works on a job's frontier: its epoch, its shards' leases, reclaiming a dead shard's work, leaving the job.

The epoch is a random token written when the frontier is created (by shard 0 of an attempt that finds none) and
compared by every script that writes to it. Redis emptied mid-crawl (restarted without its data, flushed) takes the
epoch with everything else; a shard that still works from what it remembers then finds its epoch gone (or another
one, written by the next attempt) and stops instead of crawling an empty frontier to a "finished" end. Only shard 0 of
an attempt ever creates an epoch, so a shard that notices the loss never recreates a frontier others still work on.

Leases are renewed by `LeaseKeeper`, a thread of the crawl's own, not by the reactor: a reactor blocked for longer
than the lease (a database stall holding the item queue full, a long callback) must not make a live shard look dead.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import redis

from runtime.frontier.errors import FrontierLost
from runtime.frontier.layout import QUEUE_LIB

logger = logging.getLogger("trawl.frontier")

ENDED = -1  # the job ended: its frontier is gone for good, a late shard must not crawl anew
LOST = -2  # the frontier's epoch is not this shard's: Redis lost it (or the job started again without this shard)
UNDECLARED = -3  # a shard joined between the caller's read of the members and its call: read them again, call again

# Shared by the scripts below. `base` is the frontier's key prefix; shard keys: base .. name .. member. OPEN, RENEW and
# FINISH touch the keys of every shard the frontier knows, so the caller passes in KEYS the shared keys (store.SHARED
# order: KEYS[1] is base .. 'queue') and then every per-shard key of the members it read (`members` ∪ `shards` ∪ the
# caller), and a script first checks that no shard it would touch is missing from KEYS (else UNDECLARED): every key a
# script touches is declared, and all carry the job's hash tag, so a Redis Cluster runs them on one node.
# reclaim(): a shard whose lease expired, or of an attempt before `attempt`, is dead: its in-flight requests go back
# to the queue, and the items it had written ahead but not stored yet (and orphans it was storing) become orphans,
# stored by a live shard. The shard asking (`me`) is alive whatever its lease says. Returns the requests moved.
LIB = (
    QUEUE_LIB
    + """
local function queue_of(base)
  return layout(base .. 'seq', base .. 'chunks', base .. 'chunkdata', base .. 'queued', base .. 'queue',
                base .. 'seenbuckets', base .. 'seen')
end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function lost(base, epoch)
  return redis.call('GET', base .. 'epoch') ~= epoch
end
local function push_all(target, values)
  for i = 1, #values, 1000 do
    redis.call('RPUSH', target, unpack(values, i, math.min(i + 999, #values)))
  end
end
local function unstored(base, member)
  local stored = tonumber(redis.call('GET', base .. 'walstored:' .. member) or '0')
  return redis.call('LLEN', base .. 'wal:' .. member) - stored, stored
end
local function reclaim(base, attempt, me)
  local moved, q = 0, queue_of(base)
  local now = now_ms()
  local all = redis.call('ZRANGE', base .. 'shards', 0, -1, 'WITHSCORES')
  for i = 1, #all, 2 do
    local member, expiry = all[i], tonumber(all[i + 1])
    local shard_attempt = tonumber(string.match(member, '^(%d+):'))
    if member ~= me and (expiry < now or shard_attempt < attempt) then
      local held = redis.call('HGETALL', base .. 'inflight:' .. member)
      for j = 1, #held, 2 do
        enqueue_front(q, held[j + 1], string.sub(held[j], 9))
        moved = moved + 1
      end
      local _, stored = unstored(base, member)
      push_all(base .. 'orphans', redis.call('LRANGE', base .. 'wal:' .. member, stored, -1))
      push_all(base .. 'orphans', redis.call('LRANGE', base .. 'adopting:' .. member, 0, -1))
      redis.call('UNLINK', base .. 'inflight:' .. member, base .. 'wal:' .. member, base .. 'walstored:' .. member,
                 base .. 'adopting:' .. member, base .. 'lastcommit:' .. member)
      redis.call('ZREM', base .. 'shards', member)
    end
  end
  return moved
end
-- Requests kept back for a while (throttling/requeue.py) that are due go to the queue with their priority.
local function promote(base)
  local due = redis.call('ZRANGEBYSCORE', base .. 'delayed', '-inf', now_ms(), 'LIMIT', 0, 1000)
  local q = queue_of(base)
  for _, member in ipairs(due) do
    enqueue_front(q, redis.call('HGET', base .. 'delayedscore', member) or 0, string.sub(member, 9))
  end
  if #due > 0 then
    redis.call('ZREM', base .. 'delayed', unpack(due))
    redis.call('HDEL', base .. 'delayedscore', unpack(due))
  end
end
local shared = {'queue', 'seen', 'seq', 'shards', 'members', 'progress', 'orphans', 'delayed', 'delayedscore', 'chunks',
                'chunkdata', 'queued', 'seenbuckets', 'left'}
local per_shard = {'inflight:', 'wal:', 'walstored:', 'adopting:', 'lastcommit:'}
local base = string.sub(KEYS[1], 1, -6)
local declared = {}
for _, key in ipairs(KEYS) do declared[key] = true end
local function undeclared(members)
  for _, member in ipairs(members) do
    for _, name in ipairs(per_shard) do
      if not declared[base .. name .. member] then return true end
    end
  end
  return false
end
local function refresh(base, member, ttl)
  for _, name in ipairs(shared) do redis.call('PEXPIRE', base .. name, ttl) end
  redis.call('PEXPIRE', base .. 'epoch', ttl)
  for _, name in ipairs(per_shard) do redis.call('PEXPIRE', base .. name .. member, ttl) end
end
"""
)

# ARGV: -, create ('1' or '0'), candidate epoch, ttl ms. The frontier's epoch: the one it has, else (shard 0 of
# an attempt only) `candidate`, written after deleting whatever is left without an epoch (keys that outlived a loss:
# resuming from half a frontier, a seen-set without its queue say, would skip pages). ENDED if the job ended, LOST if
# there is no epoch and this shard may not create one.
OPEN = (
    LIB
    + """
if redis.call('EXISTS', base .. 'ended') == 1 then return -1 end
local epoch = redis.call('GET', base .. 'epoch')
if epoch then
  redis.call('PEXPIRE', base .. 'epoch', ARGV[4])
  return epoch
end
if ARGV[2] ~= '1' then return -2 end
local members = redis.call('SMEMBERS', base .. 'members')
if undeclared(members) then return -3 end
for _, member in ipairs(members) do
  for _, name in ipairs(per_shard) do redis.call('UNLINK', base .. name .. member) end
end
for _, name in ipairs(shared) do redis.call('UNLINK', base .. name) end
redis.call('SET', base .. 'epoch', ARGV[3], 'PX', ARGV[4])
return ARGV[3]
"""
)

# ARGV: -, attempt, me, lease ms, ttl ms, epoch. Takes or extends this shard's lease and reclaims dead shards'
# work; ENDED or LOST (see above) instead.
RENEW = (
    LIB
    + """
if redis.call('EXISTS', base .. 'ended') == 1 then return -1 end
if lost(base, ARGV[6]) then return -2 end
-- A shard that left (FINISH) is never leased again: its lease thread may renew once more after it left, and putting
-- it back among the shards would make every other one leave as "done", none as "last", and the job never end.
if redis.call('SISMEMBER', base .. 'left', ARGV[3]) == 1 then return 0 end
if undeclared({ARGV[3], unpack(redis.call('ZRANGE', base .. 'shards', 0, -1))}) then return -3 end
local moved = reclaim(base, tonumber(ARGV[2]), ARGV[3])
redis.call('ZADD', base .. 'shards', now_ms() + tonumber(ARGV[4]), ARGV[3])
redis.call('SADD', base .. 'members', ARGV[3])
refresh(base, ARGV[3], ARGV[5])
return moved
"""
)

# ARGV: -, attempt, me, epoch. "work" (the queue has requests, kept-back ones now due included), "wait" (a shard
# holds requests, or items not stored yet, or there are orphans to store, or requests kept back until later),
# "ended" (the job has ended), "lost" (the epoch is not this shard's), else this shard leaves: "last" if no other
# shard is left, "done" otherwise.
FINISH = (
    LIB
    + """
local me = ARGV[3]
if redis.call('EXISTS', base .. 'ended') == 1 then return 'ended' end
if lost(base, ARGV[4]) then return 'lost' end
if undeclared({me, unpack(redis.call('ZRANGE', base .. 'shards', 0, -1))}) then return -3 end
reclaim(base, tonumber(ARGV[2]), me)
promote(base)
if queued_count(queue_of(base)) > 0 then return 'work' end
if redis.call('LLEN', base .. 'orphans') > 0 or redis.call('ZCARD', base .. 'delayed') > 0 then return 'wait' end
for _, member in ipairs(redis.call('ZRANGE', base .. 'shards', 0, -1)) do
  if redis.call('HLEN', base .. 'inflight:' .. member) > 0 or unstored(base, member) > 0
     or redis.call('LLEN', base .. 'adopting:' .. member) > 0 then
    return 'wait'
  end
end
redis.call('ZREM', base .. 'shards', me)
redis.call('SADD', base .. 'left', me)
if redis.call('ZCARD', base .. 'shards') == 0 then return 'last' end
return 'done'
"""
)

# KEYS: queue (the old layout's), shards, inflight, epoch, seq, chunks, chunk data, queued. ARGV: me, epoch. Hands this
# shard's requests back to the queue, in front of their priority, and drops its lease; what it wrote ahead stays its
# own to store (its task stores it before it returns). Nothing on a lost frontier.
RELEASE = (
    QUEUE_LIB
    + """
if redis.call('GET', KEYS[4]) ~= ARGV[2] then return 0 end
local q = layout(KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[1])
local held = redis.call('HGETALL', KEYS[3])
for j = 1, #held, 2 do enqueue_front(q, held[j + 1], string.sub(held[j], 9)) end
redis.call('UNLINK', KEYS[3])
return #held / 2
"""
)


class LeaseKeeper(threading.Thread):
    """Renews one shard's lease every `every` seconds (a third of the lease), on a thread of its own, until stopped.

    `renew` is the frontier's (Frontier.renew); `on_reclaimed(count)` hears of dead shards' requests put back in the
    queue, `on_lost()` of the frontier gone (the keeper stops then, as it does when the job has ended). Both are
    called from this thread."""

    def __init__(
        self,
        renew: Callable[[], int],
        *,
        every: float,
        on_reclaimed: Callable[[int], Any],
        on_lost: Callable[[], Any],
        name: str = "frontier-lease",
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.renew, self.every = renew, every
        self.on_reclaimed, self.on_lost = on_reclaimed, on_lost
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every):
            try:
                reclaimed = self.renew()
            except FrontierLost:
                self.on_lost()
                return
            except redis.RedisError as exc:  # Redis away for a moment: the lease outlives a few missed renewals
                logger.warning("frontier: lease renewal failed (%s); trying again", exc)
                continue
            if reclaimed == ENDED:
                return
            if reclaimed:
                self.on_reclaimed(reclaimed)

    def stop(self) -> None:
        """Stop renewing (the lease then runs out by itself). Does not wait: the caller may be the reactor."""
        self.done.set()
