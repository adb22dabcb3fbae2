"""A Celery pool for the crawls queue: P processes, each running up to K crawls at once on its one reactor.

A throttled crawl spends nearly all its time waiting for its next token: a whole prefork process per crawl (~150 MiB)
buys nothing. With TRAWL_CRAWLS_PER_PROCESS=K above 1, `python -m project.worker -Q crawls -c P` runs this pool
(project.worker): P processes, forked and set up as prefork's are (project.pools.hosted), each running up to K tasks
on threads of its own, so its crawls share its reactor, as Scrapy's own many-domain process does. Celery sees P×K
slots (its `-c`, which sets the prefetch too).

Celery's semantics stay prefork's: tasks are acknowledged late; a process that dies (SIGKILL, the reactor watchdog,
the kernel) fails each task it held with WorkerLostError, so their messages are requeued (task_reject_on_worker_lost)
and each crawl resumes from its frontier; a new process is forked in its place. A task past its hard time limit has
its process killed (its other crawls resume the same way); a soft limit is raised in the task's own thread.
`worker_max_tasks_per_child` and `worker_max_memory_per_child` close a process (project.pools.hosted) and fork
another at once.
"""

from __future__ import annotations

import collections
import gc
import itertools
import logging
import math
import multiprocessing
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from billiard.exceptions import WorkerLostError
from celery.concurrency.base import BasePool
from celery.signals import worker_shutting_down

from project import env
from project.pools.handles import HostProcess, Task, process_kill, task_call, task_fail
from project.pools.hosted import HostLimits, host_main

logger = logging.getLogger("trawl.pool")
FORK = multiprocessing.get_context("fork")
WATCH_SECONDS = 0.5  # how often time limits are checked
STOP_SECONDS = 10.0  # a process told to stop (nothing running) exits within this, or is killed


def crawls_per_process() -> int:
    return max(1, env.CRAWLS_PER_PROCESS)


class CrawlHostPool(BasePool):
    signal_safe = False
    task_join_will_block = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.per_process = crawls_per_process()
        self.processes = max(1, math.ceil((self.limit or 1) / self.per_process))
        self.limits = HostLimits(
            crawls=self.per_process,
            max_tasks=self.options.get("maxtasksperchild") or None,
            max_memory_kb=self.options.get("max_memory_per_child") or None,
        )
        self.initargs = self.options.get("initargs") or ()
        self.hosts: list[HostProcess] = []
        self.waiting: collections.deque[Task] = collections.deque()
        self.lock = threading.RLock()
        # Held while a thread of the pool reports to Celery, and while a process is forked (project.pools.forksafe).
        self.reporting = threading.RLock()
        self.ids = itertools.count(1)
        self.stopping = threading.Event()
        self.fork_wanted = threading.Event()
        self.draining = False  # a warm shutdown began: no task starts any more

    # Celery's side -------------------------------------------------------------------------------------------------

    def on_start(self) -> None:
        worker_shutting_down.connect(self._drain, weak=False)
        for _ in range(self.processes):
            self._fork()
        threading.Thread(target=self._keep, name="crawlhost-keeper", daemon=True).start()

    def did_start_ok(self) -> bool:
        return all(host.process.is_alive() for host in self.hosts)

    def on_apply(
        self,
        target: Callable,
        args: Any = None,
        kwargs: Any = None,
        callback: Callable | None = None,
        accept_callback: Callable | None = None,
        error_callback: Callable | None = None,
        timeout_callback: Callable | None = None,
        soft_timeout: float | None = None,
        timeout: float | None = None,
        **_options: Any,
    ) -> Task:
        task_id = next(self.ids)
        task = Task(
            id=task_id,
            message=("run", task_id, target, tuple(args or ()), dict(kwargs or {})),
            callback=callback,
            error_callback=error_callback,
            accept_callback=accept_callback,
            timeout_callback=timeout_callback,
            soft_timeout=soft_timeout or self.options.get("soft_timeout"),
            timeout=timeout or self.options.get("timeout"),
        )
        with self.lock:
            self.waiting.append(task)
            self._dispatch()
        if self.draining:
            self._drain()
        return task

    def on_stop(self) -> None:
        """Warm shutdown: the pool takes nothing more, waits for its tasks (crawls hand back at once on SIGTERM:
        crawls.worker.shutdown), then its processes exit."""
        while True:
            self._drain()  # again: a process that ended may have given some back
            with self.lock:
                busy = any(host.tasks for host in self.hosts)
            if not busy:
                break
            time.sleep(0.2)
        self._end(signal.SIGTERM)

    def _drain(self, **_signal: Any) -> None:
        """From the moment a warm shutdown begins: what has not started goes back to the queue (its message rejected
        as a lost worker's is), for another worker; a crawl host would only hand it back again."""
        with self.lock:
            self.draining = True
            unstarted, self.waiting = list(self.waiting), collections.deque()
        # Not under `reporting`: this runs in a signal handler of the main thread, which a reader holding it may wait
        # for. No process is forked once draining (_keep), so none can inherit a lock these reports take.
        for task in unstarted:
            task_fail(task, WorkerLostError("the worker is shutting down: not started"))

    def on_terminate(self) -> None:
        self._end(signal.SIGKILL)

    def terminate_job(self, pid: int, signal: int | None = None) -> None:
        raise NotImplementedError("a crawl host runs several crawls: cancel a crawl, do not kill its process")

    def _get_info(self) -> dict[str, Any]:
        return {
            **super()._get_info(),
            "processes": [host.process.pid for host in self.hosts],
            "crawls-per-process": self.per_process,
        }

    # The processes -------------------------------------------------------------------------------------------------

    def _fork(self) -> HostProcess:
        from django.db import connections

        connections.close_all()  # a forked process must never share the parent's database connection
        # The modules imported so far stay shared with the child: its collector never walks (and so never copies)
        # the objects the parent holds (they are never collected in the parent either: modules, settings, the app).
        gc.freeze()
        parent_end, child_end = FORK.Pipe()
        process = FORK.Process(target=host_main, args=(child_end, self.initargs, self.limits), daemon=True)
        with self.reporting:
            process.start()
        child_end.close()
        host = HostProcess(process=process, conn=parent_end)
        with self.lock:
            self.hosts.append(host)
            self._dispatch()
        threading.Thread(target=self._read, args=(host,), name=f"crawlhost-{process.pid}", daemon=True).start()
        return host

    def _read(self, host: HostProcess) -> None:
        while True:
            try:
                message = host.conn.recv()
            except (EOFError, OSError):
                break
            self._received(host, message)
        host.process.join()
        self._lost(host)

    def _received(self, host: HostProcess, message: tuple) -> None:
        kind = message[0]
        if kind == "accepted":
            task = host.tasks.get(message[1])
            if task is not None:
                task.accepted_at = time.monotonic()
                with self.reporting:
                    task_call(task.accept_callback, message[2], message[3])
        elif kind in ("done", "failed"):
            with self.lock:
                task = host.tasks.pop(message[1], None)
                self._dispatch()
            if task is not None and not task.timed_out:
                with self.reporting:
                    if kind == "done":
                        task_call(task.callback, message[2])
                    else:
                        task_fail(task, RuntimeError(message[2]))
        elif kind == "returned":  # the process ends soon and never started it: another one will
            with self.lock:
                task = host.tasks.pop(message[1], None)
                if task is not None:
                    self.waiting.appendleft(task)
                self._dispatch()
        elif kind == "closing":
            with self.lock:
                host.closing = True
                self._replace()

    def _lost(self, host: HostProcess) -> None:
        """The process ended: its accepted tasks are lost (requeued), the ones it never started go elsewhere."""
        code = host.process.exitcode
        with self.lock:
            if host in self.hosts:
                self.hosts.remove(host)
            tasks, host.tasks = list(host.tasks.values()), {}
            self.waiting.extendleft(reversed([task for task in tasks if task.accepted_at is None]))
            lost = [task for task in tasks if task.accepted_at is not None and not task.timed_out]
            if not self.stopping.is_set():
                self._replace()
                self._dispatch()
        if lost:
            logger.error("crawl host %s ended (exit code %s) holding %s task(s)", host.process.pid, code, len(lost))
        how = f"signal {-code} ({signal.Signals(-code).name})" if code and code < 0 else f"exitcode {code}"
        with self.reporting:
            for task in lost:
                task_fail(task, WorkerLostError(f"Worker exited prematurely: {how} Job: {task.id}."))

    def _replace(self) -> None:
        """Ask the forking thread for processes until P take tasks. Never fork here: a process dies with the thread
        that forked it (Celery sets its parent-death signal), and a reader's thread ends with its process."""
        self.fork_wanted.set()

    def _keep(self) -> None:
        """The forking thread, for the pool's life: forks replacements, and checks time limits meanwhile."""
        while not self.stopping.is_set():
            self.fork_wanted.wait(WATCH_SECONDS)
            self.fork_wanted.clear()
            while not self.stopping.is_set():
                with self.lock:
                    short = sum(not host.closing for host in self.hosts) < self.processes and not self.draining
                if not short:
                    break
                self._fork()
            self._time_limits()

    def _dispatch(self) -> None:
        """Under the lock: waiting tasks to the open process with most room (crawls spread over the processes)."""
        while self.waiting and not self.draining:
            open_hosts = [h for h in self.hosts if not h.closing and len(h.tasks) < self.per_process]
            if not open_hosts:
                return
            host = min(open_hosts, key=lambda h: len(h.tasks))
            task = self.waiting.popleft()
            host.tasks[task.id] = task
            if not host.send(task.message):  # dying: its reader puts the task back when it sees the end
                return

    def _time_limits(self) -> None:
        """Celery's limits, from each task's acceptance: the soft one raised in its thread, the hard one kills its
        process (its other crawls resume from their frontiers, as a prefork process killed with its crawl)."""
        now = time.monotonic()
        with self.lock:
            held = [(host, task) for host in self.hosts for task in host.tasks.values() if task.accepted_at]
        for host, task in held:
            ran = now - task.accepted_at
            if task.soft_timeout and ran >= task.soft_timeout and not task.soft_sent:
                task.soft_sent = True
                host.send(("soft", task.id))
            if task.timeout and ran >= task.timeout and not task.timed_out:
                task.timed_out = True
                logger.error(
                    "task %s over its hard time limit (%ss): killing crawl host %s",
                    task.id,
                    task.timeout,
                    host.process.pid,
                )
                task_call(task.timeout_callback, False, task.timeout)
                task_fail(task, WorkerLostError(f"hard time limit ({task.timeout}s) exceeded"))
                process_kill(host.process.pid, signal.SIGKILL)

    def _end(self, how: int) -> None:
        self.stopping.set()
        with self.lock:
            hosts = list(self.hosts)
        for host in hosts:
            if how == signal.SIGKILL or not host.send(("stop",)):
                process_kill(host.process.pid, how)
        for host in hosts:
            host.process.join(STOP_SECONDS)
            if host.process.is_alive():
                process_kill(host.process.pid, signal.SIGKILL)
                host.process.join(STOP_SECONDS)
