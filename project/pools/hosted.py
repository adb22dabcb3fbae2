"""Inside a crawl host process (project.pools.crawlhost): up to K tasks at once, each on a thread of its own.

The process is forked by the pool's parent and set up as a prefork pool process is (Celery's `process_initializer`:
signals, logging, the app, `worker_process_init`, which starts the reactor its crawls share). It reads tasks from its
pipe and answers `accepted` and `done` for each, as prefork's processes do. It closes (takes nothing new, ends once
its tasks have) after `max_tasks` tasks, and when its resident memory passes `max_memory_kb` it also asks every crawl
to hand its work back (SIGTERM to itself: crawls.worker.shutdown), so a process that grew is replaced without waiting
for crawls that may run for hours.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from project.pools.memory import suspects_find
from project.pools.turns import Turns

logger = logging.getLogger("trawl.pool")
MEMORY_CHECK_SECONDS = 2.0
TASK_THREAD_PREFIX = "crawl-task"  # the threads running tasks: a record of one belongs to its own task or none
_hosting = False
_host: Host | None = None
_memory_recycling = False
_task = threading.local()  # a task thread's claim ticket (project.pools.turns)
_claiming_tasks: set[str] = set()


def claims_in_order(task_name: str) -> None:
    """Tasks of this name claim a job at their start (claim_turn): a crawl host gives them a ticket as they come.
    Any other task takes none, so it never holds a claim however long it runs."""
    _claiming_tasks.add(task_name)


def memory_recycling() -> bool:
    """Whether this process hands its crawls back because it grew past worker_max_memory_per_child (and not for an
    operator's SIGTERM): each crawl's attempt then counts against it (crawls.services.lifecycle)."""
    return _memory_recycling


def hosting() -> bool:
    """Whether this process is a crawl host (several crawls on task threads), for what must differ there."""
    return _hosting


def host_recycling(why: str) -> None:
    """This process is about to end with its crawls handed back (runtime.bridge.watchdog): it starts no other task;
    the ones sent to it and not started yet go back to the pool for another process (no-op outside a crawl host)."""
    if _host is not None:
        _host.recycle(why)


@contextlib.contextmanager
def claim_turn() -> Iterator[None]:
    """Around a task's claim of its job: in a crawl host, after the claims of the tasks that came before it (their
    messages' order is the queue's priority order); elsewhere at once."""
    ticket = getattr(_task, "ticket", None)
    if _host is None or ticket is None:
        yield
        return
    _host.turns.wait(ticket)
    try:
        yield
    finally:
        _host.turns.done(ticket)


@dataclass(frozen=True)
class HostLimits:
    crawls: int  # TRAWL_CRAWLS_PER_PROCESS: tasks at once
    max_tasks: int | None  # worker_max_tasks_per_child: then the process closes
    max_memory_kb: int | None  # worker_max_memory_per_child: then every crawl hands back and the process closes


def host_main(conn: Any, initargs: tuple, limits: HostLimits) -> None:
    """The forked process's whole life (multiprocessing ends it with os._exit when this returns)."""
    from celery.concurrency.prefork import process_destructor, process_initializer

    from project.pools.forksafe import cached_property_locks_renewed

    global _hosting, _host
    cached_property_locks_renewed()  # before anything here reads one: a parent's thread may have held its lock
    _hosting = True  # before worker_process_init: its receivers ask
    _main_thread_adopted()
    process_initializer(*initargs)
    _host = Host(conn, limits)
    _host.serve()
    process_destructor(os.getpid(), 0)


def _main_thread_adopted() -> None:
    """A replacement is forked from one of the pool's threads, which becomes this process's main thread. crochet
    watches the main thread it saw when it was imported (in the worker's main process, gone here) and stops the
    reactor once that thread is dead: it must watch this one instead."""
    import sys

    shutdown = sys.modules.get("crochet._shutdown")
    if shutdown is not None:
        shutdown._watchdog._canary = threading.current_thread()


class Host:
    def __init__(self, conn: Any, limits: HostLimits) -> None:
        self.conn, self.limits = conn, limits
        self.sending = threading.Lock()  # task threads answer at once: one message at a time on the pipe
        self.running: dict[int, int] = {}  # task id → its thread's ident
        self.taken = 0
        self.closing = False  # takes no more tasks: ends once those it has are done
        self.returning = False  # ends soon: tasks not started yet go back (`returned`) for another process
        self.executor = ThreadPoolExecutor(max_workers=limits.crawls, thread_name_prefix=TASK_THREAD_PREFIX)
        self.turns = Turns()

    def send(self, message: tuple) -> None:
        with self.sending:
            self.conn.send(message)

    def serve(self) -> None:
        self.idle_kb = resident_kb()  # what it holds before any crawl: the growth is measured from here
        if self.limits.max_memory_kb:
            threading.Thread(target=self._watch_memory, name="crawlhost-memory", daemon=True).start()
        while not (self.closing and not self.running):
            try:
                if not self.conn.poll(1.0):
                    continue
                message = self.conn.recv()
            except (EOFError, OSError):  # the worker's main process is gone: nobody takes results any more
                break
            self._handle(message)
        self.executor.shutdown(wait=True)

    def _handle(self, message: tuple) -> None:
        kind = message[0]
        if kind == "run":
            _, task_id, target, args, kwargs = message
            if self.returning:
                self.send(("returned", task_id))
                return
            self.running[task_id] = 0
            claims = bool(args) and args[0] in _claiming_tasks  # Celery's tracer: (task name, task id, ...)
            self.executor.submit(self._run, task_id, self.turns.issue() if claims else None, target, args, kwargs)
        elif kind == "soft":
            self._interrupt(message[1])
        elif kind == "stop":
            self.closing = True

    def _run(self, task_id: int, ticket: int | None, target: Any, args: Any, kwargs: Any) -> None:
        from celery.concurrency.base import apply_target
        from django.db import connections

        if self.returning:
            self.running.pop(task_id, None)
            self._turn_passed(ticket)
            self.send(("returned", task_id))
            return
        _task.ticket = ticket
        self.running[task_id] = threading.get_ident()
        self.taken += 1
        if self.limits.max_tasks and self.taken >= self.limits.max_tasks:
            self._close(f"ran {self.taken} tasks (worker_max_tasks_per_child)")
        try:
            apply_target(
                target,
                args,
                kwargs,
                callback=lambda result: self._answer(task_id, result),
                accept_callback=lambda pid, at: self.send(("accepted", task_id, pid, at)),
            )
        except BaseException as exc:  # Celery's tracer catches a task's errors: this is the tracer's own
            logger.exception("task %s failed outside its tracer", task_id)
            self.send(("failed", task_id, f"{type(exc).__name__}: {exc}"))
        finally:
            self.running.pop(task_id, None)  # first: a soft limit raised here late must not leave it "running"
            _task.ticket = None
            self._turn_passed(ticket)  # a task that never claimed holds no later one
            connections.close_all()  # this thread's: an idle thread holds no database connection

    def _turn_passed(self, ticket: int | None) -> None:
        if ticket is not None:
            self.turns.done(ticket)

    def _answer(self, task_id: int, result: Any) -> None:
        try:
            self.send(("done", task_id, result))
        except Exception as exc:  # a result that does not pickle: pickled first, so nothing was written
            self.send(("failed", task_id, f"result not sent: {type(exc).__name__}: {exc}"))

    def _interrupt(self, task_id: int) -> None:
        """Celery's soft time limit, as prefork raises it in its process: in the task's own thread."""
        from celery.exceptions import SoftTimeLimitExceeded

        ident = self.running.get(task_id)
        if ident:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(SoftTimeLimitExceeded))

    def recycle(self, why: str) -> None:
        self.returning = True
        self._close(why)

    def _close(self, why: str) -> None:
        if not self.closing:
            self.closing = True
            logger.info("crawl host %s takes no more tasks: it %s; a new process replaces it", os.getpid(), why)
            self.send(("closing",))

    def _watch_memory(self) -> None:
        global _memory_recycling
        while not self.closing:
            time.sleep(MEMORY_CHECK_SECONDS)
            resident = resident_kb()
            if resident > (self.limits.max_memory_kb or resident):
                self.recycle(f"holds {resident} KiB, over worker_max_memory_per_child; its crawls hand their work back")
                suspects_find(max(0, resident - self.idle_kb) * 1024)  # which crawl spends an attempt for it
                _memory_recycling = True
                os.kill(os.getpid(), signal.SIGTERM)  # crawls.worker.shutdown: every crawl of this process hands back
                return


def resident_kb() -> int:
    """This process's resident memory (Linux); 0 where /proc does not tell."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    except (OSError, ValueError, IndexError):
        return 0
