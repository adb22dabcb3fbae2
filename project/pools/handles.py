"""What the crawl host pool (project.pools.crawlhost) holds for each task and each process, and how it reports to
Celery: each task's callbacks, as prefork's pool calls them."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from billiard.einfo import ExceptionInfo

logger = logging.getLogger("trawl.pool")


@dataclass(eq=False)
class Task:
    """One task as the pool holds it, with Celery's callbacks (celery.worker.request's execute_using_pool)."""

    id: int
    message: tuple
    callback: Callable | None
    error_callback: Callable | None
    accept_callback: Callable | None
    timeout_callback: Callable | None
    soft_timeout: float | None
    timeout: float | None
    accepted_at: float | None = None
    soft_sent: bool = False
    timed_out: bool = False

    def wait(self, timeout: float | None = None) -> None:
        """Celery keeps a weak reference to what `apply_async` returns; nobody waits on it with this pool."""


@dataclass(eq=False)
class HostProcess:
    process: Any
    conn: Any
    tasks: dict[int, Task] = field(default_factory=dict)
    closing: bool = False
    sending: threading.Lock = field(default_factory=threading.Lock)

    def send(self, message: tuple) -> bool:
        with self.sending:
            try:
                self.conn.send(message)
                return True
            except (OSError, ValueError):
                return False


def task_call(callback: Callable | None, *args: Any) -> None:
    if callback is None:
        return
    try:
        callback(*args)
    except Exception:
        logger.exception("pool callback %r failed", callback)


def task_fail(task: Task, exc: BaseException) -> None:
    try:
        raise exc
    except BaseException:
        task_call(task.error_callback, ExceptionInfo())


def process_kill(pid: int | None, how: int) -> None:
    if pid:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, how)
