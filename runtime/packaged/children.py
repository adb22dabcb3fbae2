"""The warm child processes a worker process keeps, one per package: starting, reusing, stopping, reading them.

A child (runtime.packaged.child) runs in its package's environment and serves the crawls of that package sent by
this worker process, one at a time; it exits by itself after TRAWL_PACKAGE_CHILD_IDLE_SECONDS without one. At most
TRAWL_PACKAGE_CHILDREN_KEPT are kept (the least recently used other one is stopped). A reader thread per child turns
its JSON lines into messages on a queue the task thread consumes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from project.env import BASE_DIR
from registry.packages.envs import EnvBuildError, PackageEnv, env_lease, envs_prune
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


@dataclass
class Child:
    sha256: str
    process: subprocess.Popen
    idle_seconds: float  # its pool's: it exits after this long without a crawl
    redis: ChildRedis = field(default_factory=lambda: ChildRedis(url=""))
    messages: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)
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
        try:
            return self.messages.get(timeout=timeout)
        except queue.Empty:
            return {"t": "timeout"}

    def fresh(self) -> bool:
        idle, limit = time.monotonic() - self.last_used, self.idle_seconds
        return self.process.poll() is None and idle < limit - min(REUSE_MARGIN, limit / 4)

    def stop(self, *, kill: bool = False) -> None:
        if not kill:
            self.send(cmd="exit")
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(0 if kill else 5)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)


_children: dict[str, Child] = {}  # this worker process's warm children, by package hash


def child_for(package: PackageSpec, *, pool: ChildPool, unused: Unused | None = None) -> Child:
    """A running child of the package's environment, building the environment first if this machine has none."""
    child = _children.pop(package.sha256, None)
    if child is not None and child.fresh():
        _children[package.sha256] = child
        return child
    if child is not None:
        child.stop()
    while len(_children) >= pool.kept:
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
    _children[package.sha256] = child
    return child


def _spawn(env: PackageEnv, lock_fd: int, sha256: str, pool: ChildPool, *, unused: Unused | None) -> Child:
    read_fd, write_fd = os.pipe()
    grant = ChildRedis(url="")
    try:
        undumpable()
        grant = child_redis_grant(url=pool.redis_url, acl=pool.redis_acl)
        process = subprocess.Popen(
            [str(env.python), "-P", "-m", "runtime.packaged.child"],
            stdin=subprocess.PIPE,
            cwd=BASE_DIR,
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
    with os.fdopen(read_fd, "r") as channel:
        for line in channel:
            try:
                child.messages.put(json.loads(line))
            except ValueError:
                logger.warning("package child %s sent a bad line: %.200r", child.sha256[:12], line)
    code = child.process.wait()
    _after_exit(child)
    child.messages.put({"t": "eof", "error": f"exited with code {code}"})


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
            return message["error"], _spiders_received(message.get("spiders"))
        if message.get("t") == "eof":
            _children.pop(package.sha256, None)
            return f"the package's process {message['error']} while importing {spider!r}", {}
    return f"importing {spider!r} took over {START_SECONDS}s", {}


def _spiders_received(spiders: object) -> dict[str, str]:
    """The child runs uploaded code: keep only names and paths that are strings."""
    if not isinstance(spiders, dict):
        return {}
    return {str(name)[:255]: path[:255] for name, path in spiders.items() if isinstance(path, str)}
