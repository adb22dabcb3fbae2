"""The warm child processes a worker process keeps, one per package: starting, reusing, stopping, reading them.

A child (runtime.packaged.child) runs in its package's environment and serves the crawls of that package sent by
this worker process, one at a time; it exits by itself after TRAWL_PACKAGE_CHILD_IDLE_SECONDS without one. A crawl
takes its child out of the warm ones while it runs (`child_for`) and gives it back after (`child_return`): a process
running several crawls at once (TRAWL_CRAWLS_PER_PROCESS) starts a child per concurrent crawl of one package and keeps
one warm. At most TRAWL_PACKAGE_CHILDREN_KEPT are kept (the least recently used other one is stopped). A reader thread
per child turns its JSON lines into messages on a queue the task thread consumes, both bounded
(runtime.packaged.channel).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from registry.packages.envs import EnvBuildError, PackageEnv, env_lease, envs_prune
from runtime.packaged.channel import Inbox, channel_read
from runtime.packaged.child_env import child_environment, undumpable
from runtime.packaged.child_redis import ChildRedis, ChildRedisError, child_redis_grant, child_redis_revoke
from runtime.spec import PackageSpec

logger = logging.getLogger("trawl.packages")
START_SECONDS = 120  # a child that has not said `ready` by then is broken
REUSE_MARGIN = 10  # never hand a job to a child this close to exiting for idleness
# Of these package hashes, those no version needs any more: the registry's answer (it reads the database), asked when
# a child exits so that the environment of a deprecated version goes with its last user.
Unused = Callable[[Iterable[str]], set[str]]


class PackageUnavailable(Exception):
    """This machine cannot run the package: its environment does not build, or its child does not start."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.log = log


@dataclass(frozen=True)
class ChildPool:
    """How this worker process keeps its packages' children: the project's settings, composed by
    runtime.settings.compose's child_pool and handed in by the caller."""

    idle_seconds: float  # TRAWL_PACKAGE_CHILD_IDLE_SECONDS: a child without a crawl for this long exits
    kept: int  # TRAWL_PACKAGE_CHILDREN_KEPT: warm children at most (the least recently used other one is stopped)
    redis_url: str  # Trawl's Redis, where a child's own user is made
    redis_acl: bool  # TRAWL_PACKAGE_CHILD_REDIS_ACL: a Redis user of its own per child
    child_settings: dict[str, Any] = field(repr=False)  # the child's (runtime.packaged.child_env)
    # TRAWL_PACKAGE_REDIS_NOPASS_ALLOWED: children start while a Redis user needs no password (development only)
    redis_nopass_allowed: bool = False


@dataclass
class Child:
    sha256: str
    process: subprocess.Popen
    idle_seconds: float  # its pool's: it exits after this long without a crawl
    redis: ChildRedis = field(default_factory=lambda: ChildRedis(url=""))
    inbox: Inbox = field(default_factory=Inbox)
    last_used: float = field(default_factory=time.monotonic)
    unused: Unused | None = None  # None: this machine's environments are pruned by someone else

    def send(self, **command: Any) -> None:
        try:
            self.process.stdin.write(json.dumps(command, default=str) + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass  # it died: its reader reports `eof`

    def receive(self, *, timeout: float) -> dict[str, Any]:
        """The next message, or `{"t": "timeout"}`."""
        message = self.inbox.get(timeout=timeout)
        return {"t": "timeout"} if message is None else message

    def fresh(self) -> bool:
        idle, limit = time.monotonic() - self.last_used, self.idle_seconds
        return self.process.poll() is None and idle < limit - min(REUSE_MARGIN, limit / 4)

    def stop(self, *, kill: bool = False) -> None:
        self.inbox.abandon()  # nobody reads it any more: the reader never waits on a full inbox
        if not kill:
            self.send(cmd="exit")
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(0 if kill else 5)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)


_children: dict[str, Child] = {}  # this worker process's warm children, by package hash, none of them crawling
_warm = threading.Lock()  # crawls of one process take and return children from several task threads


def child_for(package: PackageSpec, *, pool: ChildPool, unused: Unused | None = None) -> Child:
    """A running child of the package's environment, all this caller's until `child_return` (or `child_discard`),
    building the environment first if this machine has none."""
    with _warm:
        child = _children.pop(package.sha256, None)
        if child is not None and child.fresh():
            return child
        if child is not None:
            child.stop()
        while _children and len(_children) >= pool.kept:
            _children.pop(min(_children, key=lambda sha: _children[sha].last_used)).stop()
    try:
        env, lock_fd = env_lease(package=package)
    except EnvBuildError as exc:
        raise PackageUnavailable(f"the environment of {package} does not build here: {exc.message}", exc.log) from None
    child = _spawn(env, lock_fd, package.sha256, pool, unused=unused)
    ready = child.receive(timeout=START_SECONDS)
    if ready.get("t") != "ready":
        child.stop(kill=True)
        raise PackageUnavailable(f"the process for {package} did not start ({ready.get('error', 'no answer')})")
    return child


def child_return(child: Child) -> None:
    """A crawl is done with its child: kept warm for the package's next crawl, unless another one already is."""
    child.last_used = time.monotonic()
    with _warm:
        kept = child.sha256 not in _children and child.process.poll() is None
        if kept:
            _children[child.sha256] = child
    if not kept:
        child.stop()


def _spawn(env: PackageEnv, lock_fd: int, sha256: str, pool: ChildPool, *, unused: Unused | None) -> Child:
    read_fd, write_fd = os.pipe()
    grant = ChildRedis(url="")
    try:
        undumpable()
        grant = child_redis_grant(url=pool.redis_url, acl=pool.redis_acl, nopass_allowed=pool.redis_nopass_allowed)
        process = subprocess.Popen(
            [str(env.python), "-P", "-m", "runtime.packaged.child"],
            stdin=subprocess.PIPE,
            cwd=env.workdir_made(),
            env=child_environment(
                channel_fd=write_fd,
                redis_url=grant.url,
                idle_seconds=pool.idle_seconds,
                child_settings=pool.child_settings,
            ),
            # The lock: the child holds the environment's shared lock for its whole life.
            pass_fds=(write_fd, lock_fd),
            text=True,
        )
    except ChildRedisError as exc:
        os.close(read_fd)
        raise PackageUnavailable(str(exc)) from None
    except OSError as exc:
        os.close(read_fd)
        child_redis_revoke(grant)
        raise PackageUnavailable(f"cannot start {env.python}: {exc}") from None
    finally:
        os.close(write_fd)
        os.close(lock_fd)
    child = Child(sha256=sha256, process=process, idle_seconds=pool.idle_seconds, redis=grant, unused=unused)
    threading.Thread(target=_read, args=(child, read_fd), name=f"package-{sha256[:8]}", daemon=True).start()
    return child


def _read(child: Child, read_fd: int) -> None:
    with os.fdopen(read_fd, "rb") as channel:
        channel_read(channel, child.inbox, who=child.sha256[:12])
    code = child.process.wait()
    _after_exit(child)
    child.inbox.put_last({"t": "eof", "error": f"exited with code {code}"})


def _after_exit(child: Child) -> None:
    """The child is gone: its Redis user goes, and it was perhaps the last user of a deprecated version's
    environment. Here, not in the child: that asks the database, which the child has no access to."""
    child_redis_revoke(child.redis)
    if child.unused is None:
        return
    from django.db import connections

    try:
        envs_prune(unused=child.unused, only=child.sha256)
    except Exception:  # robust: pruning is a courtesy; the next worker start or deprecation prunes again
        logger.exception("package environment prune failed")
    finally:
        connections.close_all()  # this thread's own connections: it ends now


def child_discard(child: Child) -> None:
    """Killed, crashed, or interrupted mid-crawl (soft time limit): that child is in no state to reuse."""
    with _warm:
        if _children.get(child.sha256) is child:
            del _children[child.sha256]
    child.stop(kill=True)


def package_check(
    *, package: PackageSpec, spider: str, pool: ChildPool, unused: Unused | None = None, settings_module: str = ""
) -> tuple[str, dict[str, str]]:
    """Why `spider` (or a spider of the project's `settings_module`) does not load inside the package's environment
    ("" when they do), and the project's spiders by name ({name: dotted class path}). Leaves the child warm."""
    child = child_for(package, pool=pool, unused=unused)
    child.send(cmd="check", spider=spider, settings_module=settings_module)
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        message = child.receive(timeout=max(0.1, deadline - time.monotonic()))
        if message.get("t") == "checked" and message.get("spider") == spider:
            child_return(child)
            return message["error"], _spiders_received(message.get("spiders"))
        if message.get("t") == "eof":
            return f"the package's process {message['error']} while importing {spider!r}", {}
    child_discard(child)
    return f"importing {spider!r} took over {START_SECONDS}s", {}


def _spiders_received(spiders: object) -> dict[str, str]:
    """The child runs uploaded code: keep only names and paths that are strings."""
    if not isinstance(spiders, dict):
        return {}
    return {str(name)[:255]: path[:255] for name, path in spiders.items() if isinstance(path, str)}
