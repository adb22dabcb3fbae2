"""A crawl host is forked while the worker's other threads run: a cached_property lock one of them held at that
instant must not stay held in the child (project.pools.forksafe). Real forks: the parent's thread holds the very
lock Celery's Redis result backend takes to read its client, as a pool reader storing a lost task's result does."""

from __future__ import annotations

import os
import signal
import threading
import time

from celery.backends.redis import RedisBackend

from project.pools.forksafe import cached_property_locks_renewed

HANG = 5.0  # seconds the child waits for the lock before it calls itself stuck
GIVE_UP = 120.0  # a child that never exits at all (it should within HANG)


def child(renew: bool) -> None:
    if renew:
        cached_property_locks_renewed()
    got = RedisBackend.__dict__["client"].lock.acquire(timeout=HANG)
    os._exit(0 if got else 3)


def fork_while_a_thread_holds_the_backend_client_lock(*, renew: bool) -> int:
    lock = RedisBackend.__dict__["client"].lock
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            holding.set()
            release.wait(GIVE_UP)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(GIVE_UP)
        # A bare fork, as the pool's: multiprocessing's start in the child (stdin, its after-fork hooks) takes locks of
        # its own, which a thread an earlier test of this process left could hold at the fork.
        pid = os.fork()
        if pid == 0:
            try:
                child(renew)
            finally:
                os._exit(4)
        deadline = time.monotonic() + GIVE_UP
        while not (ended := os.waitpid(pid, os.WNOHANG))[0]:
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                ended = os.waitpid(pid, 0)
                break
            time.sleep(0.05)
        return os.waitstatus_to_exitcode(ended[1])
    finally:
        release.set()
        holder.join()


def test_the_child_takes_a_cached_property_lock_a_parent_thread_held_at_the_fork():
    assert fork_while_a_thread_holds_the_backend_client_lock(renew=True) == 0


def test_without_new_locks_the_child_would_be_stuck_on_it():
    """Every result a task thread stores would wait for a lock nobody is left to release."""
    assert fork_while_a_thread_holds_the_backend_client_lock(renew=False) == 3


def test_every_cached_property_lock_is_renewed():
    before = RedisBackend.__dict__["client"].lock
    assert cached_property_locks_renewed() > 0
    assert RedisBackend.__dict__["client"].lock is not before
