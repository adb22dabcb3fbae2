"""A crawl's scheduler state in Redis, under the job's id, so it outlives the process that crawls it.

- `queue`: the frontier, a sorted set of serialized requests (score = -priority; an 8-byte sequence number in front
  of each member keeps equal priorities first in, first out and makes every member unique).
- `seen`: the seen-set of request fingerprints, 12 bytes each (96 bits of Scrapy's SHA-1 fingerprint).
- `inflight:<attempt>:<shard>`: the requests a shard took from the queue and has not finished (member → score),
  held under the shard's lease in `shards` (member `<attempt>:<shard>`, score = lease expiry in ms, Redis time).
  A request leaves it only once its page was fetched, its links queued and its items stored.
- `progress`: each shard's latest stats (`<attempt>:<shard>` → JSON), summed into the job's stats over attempts.

Requests of a shard whose lease expired, or of an earlier attempt, go back to the queue (`reclaim`). Every script
refreshes the keys it writes to expire after TRAWL_FRONTIER_TTL_SECONDS (a day) untouched; the job's end deletes them.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio
from django.conf import settings

from project.redis import redis_key

FINGERPRINT_BYTES = 12
SHARED = ("queue", "seen", "seq", "shards", "members", "progress", "orphans", "ended")
PER_SHARD = ("inflight", "wal", "walstored", "adopting")

# Shared by the scripts below. `base` is redis_key("frontier", job, ""); shard keys: base .. name .. ":" .. member.
# reclaim(): a shard whose lease expired, or of an attempt before `attempt`, is dead: its in-flight requests go back
# to the queue, and the items it had written ahead but not stored yet (and orphans it was storing) become orphans,
# stored by a live shard. Returns the requests moved.
_LIB = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
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
local function reclaim(base, attempt)
  local moved = 0
  local now = now_ms()
  local all = redis.call('ZRANGE', base .. 'shards', 0, -1, 'WITHSCORES')
  for i = 1, #all, 2 do
    local member, expiry = all[i], tonumber(all[i + 1])
    local shard_attempt = tonumber(string.match(member, '^(%d+):'))
    if expiry < now or shard_attempt < attempt then
      local held = redis.call('HGETALL', base .. 'inflight:' .. member)
      for j = 1, #held, 2 do
        redis.call('ZADD', base .. 'queue', held[j + 1], held[j])
        moved = moved + 1
      end
      local _, stored = unstored(base, member)
      push_all(base .. 'orphans', redis.call('LRANGE', base .. 'wal:' .. member, stored, -1))
      push_all(base .. 'orphans', redis.call('LRANGE', base .. 'adopting:' .. member, 0, -1))
      redis.call('DEL', base .. 'inflight:' .. member, base .. 'wal:' .. member, base .. 'walstored:' .. member,
                 base .. 'adopting:' .. member)
      redis.call('ZREM', base .. 'shards', member)
    end
  end
  return moved
end
local function refresh(base, member, ttl)
  for _, name in ipairs({'queue', 'seen', 'seq', 'shards', 'members', 'progress', 'orphans'}) do
    redis.call('PEXPIRE', base .. name, ttl)
  end
  for _, name in ipairs({'inflight:', 'wal:', 'walstored:', 'adopting:'}) do
    redis.call('PEXPIRE', base .. name .. member, ttl)
  end
end
"""

# ARGV: base, attempt, me, lease ms, ttl ms. Takes or extends this shard's lease and reclaims dead shards' work;
# -1 if the job already ended (a shard that starts late must not crawl a frontier that is gone).
_RENEW = (
    _LIB
    + """
local base = ARGV[1]
if redis.call('EXISTS', base .. 'ended') == 1 then return -1 end
local moved = reclaim(base, tonumber(ARGV[2]))
redis.call('ZADD', base .. 'shards', now_ms() + tonumber(ARGV[4]), ARGV[3])
redis.call('SADD', base .. 'members', ARGV[3])
refresh(base, ARGV[3], ARGV[5])
return moved
"""
)

# KEYS: seen, queue, seq, wal, inflight, members, shards. ARGV: ttl ms, me, k, n, then n requests as (fingerprint
# ('' = do not filter), score, payload), then m, m items, then the members of the requests done. In this order: queue
# each request unless its fingerprint was seen, write the items ahead, take the done requests out of flight, and take
# up to k of the most urgent queued requests into flight (`members` names every shard that ever held one, so the job's
# end finds all their keys) — unless this shard no longer holds a lease: a shard that was reclaimed (a late commit of
# a warm shutdown, say) must not take requests nobody would reclaim again. Returns {1 (queued) or 0 (seen) for each
# request, the requests taken, the queue's length}.
_COMMIT = """
local ttl, me, k, n = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local queued, at = {}, 5
for r = 1, n do
  local fingerprint = ARGV[at]
  if fingerprint ~= '' and redis.call('SADD', KEYS[1], fingerprint) == 0 then
    queued[r] = 0
  else
    local seq = redis.call('INCR', KEYS[3])
    redis.call('ZADD', KEYS[2], ARGV[at + 1], struct.pack('>I8', seq) .. ARGV[at + 2])
    queued[r] = 1
  end
  at = at + 3
end
if n > 0 then
  for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ttl) end
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
local taken = {}
if k > 0 and redis.call('ZSCORE', KEYS[7], me) then
  local popped = redis.call('ZPOPMIN', KEYS[2], k)
  for i = 1, #popped, 2 do
    redis.call('HSET', KEYS[5], popped[i], popped[i + 1])
    taken[#taken + 1] = popped[i]
  end
  if #taken > 0 then
    redis.call('PEXPIRE', KEYS[5], ttl)
    redis.call('SADD', KEYS[6], me)
    redis.call('PEXPIRE', KEYS[6], ttl)
  end
end
return {queued, taken, redis.call('ZCARD', KEYS[2])}
"""

# ARGV: base, attempt, me. "work" (the queue has requests), "wait" (a shard holds requests, or items not stored
# yet, or there are orphans to store), else this shard leaves: "last" if no other shard is left, "done" otherwise.
_FINISH = (
    _LIB
    + """
local base, me = ARGV[1], ARGV[3]
reclaim(base, tonumber(ARGV[2]))
if redis.call('ZCARD', base .. 'queue') > 0 then return 'work' end
if redis.call('LLEN', base .. 'orphans') > 0 then return 'wait' end
for _, member in ipairs(redis.call('ZRANGE', base .. 'shards', 0, -1)) do
  if redis.call('HLEN', base .. 'inflight:' .. member) > 0 or unstored(base, member) > 0
     or redis.call('LLEN', base .. 'adopting:' .. member) > 0 then
    return 'wait'
  end
end
redis.call('ZREM', base .. 'shards', me)
if redis.call('ZCARD', base .. 'shards') == 0 then return 'last' end
return 'done'
"""
)

# KEYS: queue, shards, inflight. ARGV: me. Hands this shard's requests back to the queue and drops its lease; what it
# wrote ahead stays its own to store (its task stores it before it returns).
_RELEASE = """
local held = redis.call('HGETALL', KEYS[3])
for j = 1, #held, 2 do redis.call('ZADD', KEYS[1], held[j + 1], held[j]) end
redis.call('DEL', KEYS[3])
return #held / 2
"""

# KEYS: wal, walstored, progress. ARGV: count, me, progress JSON ('' = none), ttl ms. `count` more written-ahead
# items are stored: drop them from the log (those not written yet are dropped when they are), record the stats.
_STORED = """
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

# KEYS: orphans, adopting. ARGV: count, ttl ms. Takes up to `count` orphaned items into this shard's `adopting` list
# (orphans again if this shard dies before storing them).
_ADOPT = """
local items = redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
if #items == 0 then return {} end
redis.call('LTRIM', KEYS[1], #items, -1)
for i = 1, #items, 1000 do redis.call('RPUSH', KEYS[2], unpack(items, i, math.min(i + 999, #items))) end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return items
"""


@functools.cache
def binary_redis() -> redis.Redis:
    """Frontier members and fingerprints are bytes: a client that does not decode replies."""
    return redis.Redis.from_url(
        settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=5, health_check_interval=30, retry_on_timeout=True
    )


def async_binary_redis() -> redis.asyncio.Redis:
    """binary_redis for an event loop (a crawl's reactor): the caller owns it and closes it on that loop."""
    return redis.asyncio.Redis.from_url(settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=5)


@functools.cache
def _scripts() -> dict[str, Any]:
    client = binary_redis()
    sources = {
        "renew": _RENEW,
        "commit": _COMMIT,
        "finish": _FINISH,
        "release": _RELEASE,
        "stored": _STORED,
        "adopt": _ADOPT,
    }
    return {name: client.register_script(source) for name, source in sources.items()}


def compact_fingerprint(fingerprint: bytes) -> bytes:
    return fingerprint[:FINGERPRINT_BYTES]


@dataclass(frozen=True)
class Committed:
    queued: list[bool]  # for each request sent: queued (True) or seen before (False)
    taken: list[bytes]  # requests taken into flight
    pending: int  # requests left in the queue

    @classmethod
    def of(cls, reply: list[Any]) -> Committed:
        queued, taken, pending = reply
        return cls([bool(flag) for flag in queued], list(taken), int(pending))


class Frontier:
    """One job's frontier, seen from one shard of one attempt (`member` is `<attempt>:<shard>`)."""

    def __init__(self, job_id: object, *, attempt: int = 1, shard: int = 0) -> None:
        self.job_id = str(job_id)
        self.attempt = int(attempt)
        self.shard = int(shard)
        self.member = f"{self.attempt}:{self.shard}"
        self.base = redis_key("frontier", self.job_id, "")
        self.inflight = self.mine("inflight")
        self.redis = binary_redis()
        self.ttl_ms = int(settings.TRAWL_FRONTIER_TTL_SECONDS * 1000)
        self.lease_ms = int(settings.TRAWL_FRONTIER_LEASE_SECONDS * 1000)
        self.async_commit: Any = None  # the commit script registered with the asyncio client of commit_async

    def key(self, name: str) -> str:
        return self.base + name

    def mine(self, name: str, member: str | None = None) -> str:
        return f"{self.base}{name}:{member or self.member}"

    def commit(
        self,
        *,
        requests: list[tuple[bytes, int, bytes | None]] = (),
        items: list[bytes] = (),
        done: list[bytes] = (),
        take: int = 0,
    ) -> Committed:
        """In one script call and in this order: queue `requests` (payload, priority, fingerprint) unless seen, write
        `items` ahead to this shard's log, take the `done` requests out of flight, and take up to `take` of the most
        urgent queued requests into flight. So a request leaves flight only once what it yielded is in Redis."""
        keys, args = self._commit_call(requests=requests, items=items, done=done, take=take)
        return Committed.of(_scripts()["commit"](keys=keys, args=args))

    async def commit_async(
        self,
        client: redis.asyncio.Redis,
        *,
        requests: list[tuple[bytes, int, bytes | None]] = (),
        items: list[bytes] = (),
        done: list[bytes] = (),
        take: int = 0,
    ) -> Committed:
        """commit() awaited on an event loop (`client` from async_binary_redis), so a crawl never waits for Redis."""
        keys, args = self._commit_call(requests=requests, items=items, done=done, take=take)
        # redis-py's script object: EVALSHA, loading the script once more if Redis lost it (a restart, SCRIPT FLUSH).
        if self.async_commit is None or self.async_commit.registered_client is not client:
            self.async_commit = client.register_script(_COMMIT)
        return Committed.of(await self.async_commit(keys=keys, args=args))

    def _commit_call(
        self, *, requests: list[tuple[bytes, int, bytes | None]], items: list[bytes], done: list[bytes], take: int
    ) -> tuple[list[str], list[Any]]:
        keys = [self.key("seen"), self.key("queue"), self.key("seq"), self.mine("wal"), self.inflight]
        args: list[Any] = [self.ttl_ms, self.member, take, len(requests)]
        for payload, priority, fingerprint in requests:
            args += (fingerprint or b"", -int(priority), payload)
        return [*keys, self.key("members"), self.key("shards")], [*args, len(items), *items, *done]

    def push(self, payload: bytes, *, priority: int = 0, fingerprint: bytes | None = None) -> bool:
        """Queue a request unless its fingerprint was seen (no fingerprint: always queue). True if queued."""
        return self.commit(requests=[(payload, priority, fingerprint)]).queued[0]

    def seen(self, fingerprint: bytes) -> bool:
        """Add to the seen-set; True if it was already there."""
        return not self.redis.sadd(self.key("seen"), fingerprint)

    def pop(self, count: int = 1) -> list[bytes]:
        """Up to `count` of the most urgent queued requests, now in this shard's in-flight set."""
        return self.commit(take=count).taken

    @staticmethod
    def payload(member: bytes) -> bytes:
        return member[8:]

    def ack(self, members: list[bytes]) -> None:
        """These requests are done (nothing they yielded is written ahead: no items)."""
        self.commit(done=members)

    def stored(self, count: int, *, progress: dict[str, Any] | None = None) -> None:
        """`count` more of this shard's written-ahead items are in the database; record its stats with them."""
        keys = [self.mine("wal"), self.mine("walstored"), self.key("progress")]
        body = json.dumps(progress, default=str) if progress is not None else ""
        _scripts()["stored"](keys=keys, args=[count, self.member, body, self.ttl_ms])

    def adopt(self, count: int) -> list[bytes]:
        """Up to `count` items a dead shard wrote ahead but never stored; call `adopted()` once they are stored."""
        return list(_scripts()["adopt"](keys=[self.key("orphans"), self.mine("adopting")], args=[count, self.ttl_ms]))

    def adopted(self) -> None:
        self.redis.delete(self.mine("adopting"))

    def renew(self) -> int:
        """Take or extend this shard's lease; return requests reclaimed from dead shards or earlier attempts, or -1
        if the job has ended."""
        return int(
            _scripts()["renew"](keys=[], args=[self.base, self.attempt, self.member, self.lease_ms, self.ttl_ms])
        )

    def try_finish(self) -> str:
        """`work`, `wait`, or (leaving the job) `done` / `last` — see _FINISH."""
        result = _scripts()["finish"](keys=[], args=[self.base, self.attempt, self.member])
        return result.decode() if isinstance(result, bytes) else str(result)

    def release(self) -> int:
        """Put this shard's in-flight requests back in the queue (warm shutdown); its lease runs out by itself."""
        keys = [self.key("queue"), self.key("shards"), self.inflight]
        return int(_scripts()["release"](keys=keys, args=[self.member]))

    def pending(self) -> int:
        return int(self.redis.zcard(self.key("queue")))

    def inflight_payloads(self) -> list[bytes]:
        """Every shard's in-flight requests (for inspection and tests)."""
        members = [m.decode() for m in self.redis.zrange(self.key("shards"), 0, -1)]
        return [self.payload(raw) for m in members for raw in self.redis.hkeys(self.mine("inflight", m))]

    def progress(self) -> dict[str, dict[str, Any]]:
        """Each shard's latest stats, by `<attempt>:<shard>`."""
        return {member.decode(): json.loads(raw) for member, raw in self.redis.hgetall(self.key("progress")).items()}

    def delete(self) -> None:
        members = [m.decode() for m in self.redis.smembers(self.key("members"))]
        per_shard = [self.mine(name, m) for m in members for name in PER_SHARD]
        self.redis.delete(*[self.key(name) for name in SHARED], *per_shard)

    def end(self) -> None:
        """Delete the frontier and leave a small marker (for a day), so a shard starting late does not crawl anew."""
        self.delete()
        self.redis.set(self.key("ended"), b"1", px=self.ttl_ms)


def frontier_delete(*, job_id: object) -> None:
    """The job ended: drop its frontier, every key of it."""
    Frontier(job_id).end()
