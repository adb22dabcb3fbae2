"""One job's frontier in Redis, seen from one shard of one attempt: the calls its scheduler and its task make."""

from __future__ import annotations

import functools
import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio

from project.redis import hash_tag, loop_redis, redis_client, redis_key
from runtime.frontier import commits, leases
from runtime.frontier.errors import FrontierEnded, FrontierLost
from runtime.frontier.layout import FINGERPRINT_BYTES
from runtime.frontier.leases import ENDED, LOST, UNDECLARED

# The old layout's `queue` and `seen` (runtime.frontier.layout) first: leases.LIB finds the key prefix from KEYS[1].
SHARED = ("queue", "seen", "seq", "shards", "members", "progress", "orphans", "epoch", "ended", "delayed")
SHARED += ("delayedscore", "chunks", "chunkdata", "queued", "seenbuckets", "left", "budget:pages")
SHARED += ("budget:items",)
PER_SHARD = ("inflight", "wal", "walstored", "adopting", "lastcommit")
# A script answers UNDECLARED only when a shard joined between reading the members and the call; a few more reads
# always settle it (shards join once each).
_DECLARE_TRIES = 20


@functools.cache
def binary_redis() -> redis.Redis:
    """Frontier members and fingerprints are bytes: a client that does not decode replies."""
    return redis_client(decode=False, health_check_interval=30, retry_on_timeout=True)


def async_binary_redis() -> redis.asyncio.Redis:
    """binary_redis for the running event loop (a crawl process's reactor): shared by its crawls, never closed."""
    return loop_redis(decode=False)


@functools.cache
def _scripts() -> dict[str, Any]:
    client = binary_redis()
    sources = {
        "open": leases.OPEN,
        "renew": leases.RENEW,
        "finish": leases.FINISH,
        "release": leases.RELEASE,
        "commit": commits.COMMIT,
        "stored": commits.STORED,
        "adopt": commits.ADOPT,
        "seen": commits.SEEN,
    }
    return {name: client.register_script(source) for name, source in sources.items()}


def compact_fingerprint(fingerprint: bytes) -> bytes:
    """FINGERPRINT_BYTES of a fingerprint: the first of a SHA-1 (Scrapy's), a digest of any other length (the
    seen-set's buckets compare fixed-width entries)."""
    short = fingerprint if len(fingerprint) in (FINGERPRINT_BYTES, 20) else hashlib.sha1(fingerprint).digest()
    return short[:FINGERPRINT_BYTES]


@dataclass(frozen=True)
class Committed:
    queued: list[bool]  # for each request sent: queued (True) or seen before (False)
    taken: list[bytes]  # requests taken into flight
    pending: int  # requests left in the queue
    delayed: int = 0  # requests kept back until they are due (a site refused them)
    next_due: float | None = None  # seconds until the first of them is due

    @classmethod
    def of(cls, reply: Any) -> Committed:
        queued, taken, pending, delayed, wait_ms = reply
        next_due = int(wait_ms) / 1000 if int(wait_ms) >= 0 else None
        return cls([bool(flag) for flag in queued], list(taken), int(pending), int(delayed), next_due)


class Frontier:
    """One job's frontier, seen from one shard of one attempt (`member` is `<attempt>:<shard>`).

    `epoch` is the frontier's as this shard knows it (runtime.frontier.leases); without one the first call that needs
    it opens the frontier (creating it if there is none). Every call that writes raises FrontierLost once the epoch
    in Redis is not this one, and sets `lost`."""

    def __init__(
        self,
        job_id: object,
        *,
        ttl_seconds: float,
        lease_seconds: float,
        attempt: int = 1,
        shard: int = 0,
        epoch: str = "",
    ) -> None:
        self.job_id = str(job_id)
        self.attempt = int(attempt)
        self.shard = int(shard)
        self.member = f"{self.attempt}:{self.shard}"
        self.base = redis_key("frontier", hash_tag(self.job_id), "")
        self.inflight = self.mine("inflight")
        self.redis = binary_redis()
        self.ttl_ms = int(ttl_seconds * 1000)  # TRAWL_FRONTIER_TTL_SECONDS
        self.lease_ms = int(lease_seconds * 1000)  # TRAWL_FRONTIER_LEASE_SECONDS
        self.epoch = epoch
        self.lost = False
        self.async_commit: Any = None  # the commit script registered with the asyncio client of commit_async

    def key(self, name: str) -> str:
        return self.base + name

    def mine(self, name: str, member: str | None = None) -> str:
        return f"{self.base}{name}:{member or self.member}"

    def open(self, *, create: bool = True) -> str:
        """The frontier's epoch: the one it has, else a new one if `create` (shard 0 of an attempt: a fresh frontier,
        the crawl starts again from its start URL). "" if the job has ended; FrontierLost if there is none to join."""
        result = self._run_declared("open", ["-", int(create), uuid.uuid4().hex, self.ttl_ms])
        if result == ENDED:
            return ""
        self._check(result)
        self.epoch = result.decode() if isinstance(result, bytes) else str(result)
        return self.epoch

    def _opened(self) -> bool:
        return bool(self.epoch or self.open())

    def _check(self, reply: Any) -> Any:
        if reply == ENDED:
            self.lost = True
            raise FrontierEnded(f"job {self.job_id} has ended: its frontier is gone")
        if reply == LOST:
            self.lost = True
            raise FrontierLost(f"the frontier of job {self.job_id} is gone from Redis (emptied or restarted empty)")
        return reply

    def commit(
        self,
        *,
        requests: list[tuple] = (),
        items: list[bytes] = (),
        done: list[bytes] = (),
        take: int = 0,
        token: bytes = b"",
    ) -> Committed:
        """In one script call and in this order: queue `requests` (payload, priority, fingerprint[, seconds to keep it
        back]) unless seen, write `items` ahead to this shard's log, take the `done` requests out of flight, move the
        kept-back requests that are due into the queue, and take up to `take` of the most urgent queued requests into
        flight. So a request leaves flight only once what it yielded is in Redis. The same `token` again (a retry
        whose first reply was lost) returns the first reply without applying anything twice."""
        self._opened()
        keys, args = self._commit_call(requests=requests, items=items, done=done, take=take, token=token)
        return Committed.of(self._check(_scripts()["commit"](keys=keys, args=args)))

    async def commit_async(
        self,
        client: redis.asyncio.Redis,
        *,
        requests: list[tuple] = (),
        items: list[bytes] = (),
        done: list[bytes] = (),
        take: int = 0,
        token: bytes = b"",
    ) -> Committed:
        """commit() awaited on an event loop (`client` from async_binary_redis), so a crawl never waits for Redis.
        The frontier must be open already (the scheduler opens it before the crawl starts)."""
        keys, args = self._commit_call(requests=requests, items=items, done=done, take=take, token=token)
        # redis-py's script object: EVALSHA, loading the script once more if Redis lost it (a restart, SCRIPT FLUSH).
        if self.async_commit is None or self.async_commit.registered_client is not client:
            self.async_commit = client.register_script(commits.COMMIT)
        return Committed.of(self._check(await self.async_commit(keys=keys, args=args)))

    def _commit_call(
        self, *, requests: list[tuple], items: list[bytes], done: list[bytes], take: int, token: bytes
    ) -> tuple[list[str], list[Any]]:
        keys = [self.key("seen"), self.key("queue"), self.key("seq"), self.mine("wal"), self.inflight]
        keys += [self.key("members"), self.key("shards"), self.key("epoch"), self.key("ended")]
        keys += [self.key("delayed"), self.key("delayedscore")]
        keys += [self.key("chunks"), self.key("chunkdata"), self.key("queued"), self.key("seenbuckets")]
        keys += [self.mine("lastcommit")]
        args: list[Any] = [self.ttl_ms, self.member, take, self.epoch, token, len(requests)]
        for payload, priority, fingerprint, *delay in requests:  # delay: seconds to keep it back (optional)
            filtered = compact_fingerprint(fingerprint) if fingerprint else b""
            args += (filtered, -int(priority), round(delay[0] * 1000) if delay else 0, payload)
        return keys, [*args, len(items), *items, *done]

    def push(self, payload: bytes, *, priority: int = 0, fingerprint: bytes | None = None) -> bool:
        """Queue a request unless its fingerprint was seen (no fingerprint: always queue). True if queued."""
        return self.commit(requests=[(payload, priority, fingerprint)]).queued[0]

    def seen(self, fingerprint: bytes) -> bool:
        """Add to the seen-set; True if it was already there."""
        self._opened()
        keys = [self.key("seen"), self.key("seenbuckets"), self.key("epoch"), self.key("ended")]
        args = [compact_fingerprint(fingerprint), self.ttl_ms, self.epoch]
        return bool(self._check(_scripts()["seen"](keys=keys, args=args)))

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
        self._opened()
        keys = [self.mine("wal"), self.mine("walstored"), self.key("progress"), self.key("epoch"), self.key("ended")]
        body = json.dumps(progress, default=str) if progress is not None else ""
        self._check(_scripts()["stored"](keys=keys, args=[count, self.member, body, self.ttl_ms, self.epoch]))

    def adopt(self, count: int) -> list[bytes]:
        """Up to `count` items a dead shard wrote ahead but never stored; call `adopted()` once they are stored."""
        keys = [self.key("orphans"), self.mine("adopting"), self.key("epoch")]
        return list(_scripts()["adopt"](keys=keys, args=[count, self.ttl_ms, self.epoch]))

    def adopted(self) -> None:
        self.redis.unlink(self.mine("adopting"))

    def renew(self) -> int:
        """Take or extend this shard's lease; return requests reclaimed from dead shards or earlier attempts, or -1
        if the job has ended. Safe from any thread (leases.LeaseKeeper calls it)."""
        if not self._opened():
            return ENDED
        args = ["-", self.attempt, self.member, self.lease_ms, self.ttl_ms, self.epoch]
        result = self._run_declared("renew", args)
        return ENDED if result == ENDED else int(self._check(result))

    def try_finish(self) -> str:
        """`work`, `wait`, `ended`, `lost`, or (leaving the job) `done` / `last` — see leases.FINISH."""
        self._opened()
        result = self._run_declared("finish", ["-", self.attempt, self.member, self.epoch])
        verdict = result.decode() if isinstance(result, bytes) else str(result)
        self.lost = self.lost or verdict in ("lost", "ended")
        return verdict

    def _run_declared(self, script: str, args: list[Any]) -> Any:
        """Run a script that touches every shard's keys (leases.OPEN, RENEW, FINISH), all of them passed in KEYS."""
        for _ in range(_DECLARE_TRIES):
            with self.redis.pipeline(transaction=False) as pipe:
                known, leased = pipe.smembers(self.key("members")).zrange(self.key("shards"), 0, -1).execute()
            members = sorted({self.member, *(m.decode() for m in (*known, *leased))})
            keys = [self.key(name) for name in SHARED] + [self.mine(name, m) for m in members for name in PER_SHARD]
            result = _scripts()[script](keys=keys, args=args)
            if result != UNDECLARED:
                return result
        raise redis.RedisError(f"the shards of job {self.job_id} kept changing while {script} ran; try again")

    def release(self) -> int:
        """Put this shard's in-flight requests back in the queue (warm shutdown); its lease runs out by itself."""
        keys = [self.key("queue"), self.key("shards"), self.inflight, self.key("epoch")]
        keys += [self.key("seq"), self.key("chunks"), self.key("chunkdata"), self.key("queued")]
        return int(_scripts()["release"](keys=keys, args=[self.member, self.epoch]))

    def pending(self) -> int:
        """Requests queued (the old layout's still there included)."""
        with self.redis.pipeline(transaction=False) as pipe:
            queued, legacy = pipe.get(self.key("queued")).zcard(self.key("queue")).execute()
        return int(queued or 0) + int(legacy)

    def inflight_payloads(self) -> list[bytes]:
        """Every shard's in-flight requests (for inspection and tests)."""
        members = [m.decode() for m in self.redis.zrange(self.key("shards"), 0, -1)]
        return [self.payload(raw) for m in members for raw in self.redis.hkeys(self.mine("inflight", m))]

    def budget_count(self, what: str) -> int:
        """Count one of `what` (`pages` sent, `items` kept) for the job, by any shard of any attempt; the job's count
        so far: runtime.watch.budget's bounds hold across attempts and shards."""
        key = self.key(f"budget:{what}")
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.incr(key)
            pipe.pexpire(key, self.ttl_ms)
            return int(pipe.execute()[0])

    def progress(self) -> dict[str, dict[str, Any]]:
        """Each shard's latest stats, by `<attempt>:<shard>`."""
        return {member.decode(): json.loads(raw) for member, raw in self.redis.hgetall(self.key("progress")).items()}

    def delete(self) -> None:
        """Drop every key; UNLINK, so Redis frees a big queue or seen-set on a thread of its own, not while it serves
        everyone else."""
        members = [m.decode() for m in self.redis.smembers(self.key("members"))]
        per_shard = [self.mine(name, m) for m in members for name in PER_SHARD]
        self.redis.unlink(*[self.key(name) for name in SHARED], *per_shard)

    def end(self) -> None:
        """Delete the frontier and leave a small marker (for a day), so a shard starting late does not crawl anew."""
        self.delete()
        self.redis.set(self.key("ended"), b"1", px=self.ttl_ms)


def frontier_delete(*, job_id: object, ttl_seconds: float) -> None:
    """The job ended: drop its frontier, every key of it (its `ended` marker kept for `ttl_seconds`)."""
    Frontier(job_id, ttl_seconds=ttl_seconds, lease_seconds=0).end()  # an end takes no lease
