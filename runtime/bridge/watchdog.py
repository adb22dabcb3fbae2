"""The reactor watchdog: a crawl process whose reactor stops answering hands its crawls back and is replaced.

Every crawl of a process runs on its one reactor thread. Spider code or an extraction that does not return (a CPU
loop, a blocking call, an XPath walking a hostile page for hours) holds that thread: no crawl of the process makes
progress, a job timeout cannot stop it (stopping needs the reactor), and every later crawl of the process would start
nothing. The task thread keeps heartbeating meanwhile, so the reaper sees nothing wrong.

A thread of its own asks the reactor to answer (`callFromThread`) every `ping_seconds`. When the oldest unanswered
question is `stall_seconds` old and the process holds a crawl, the process has stalled: the watchdog logs the
reactor thread's stack, hands every crawl it watches back (each crawl's own `hand_back`, given whether it is a
suspect: its crawler, spider or one of their components is on the reactor's stack; with none found there, every
in-process crawl is), then ends the process. Celery's pool forks a replacement; the task's message, acknowledged
late and rejected when its worker is lost, comes back and finds its attempt already over.

The reactor waiting on purpose is not a stall: for the task thread to drain a full item queue (backpressure while the
database lags, which TRAWL_INFRA_PATIENCE_SECONDS governs) or for its tick (`reactor_held`).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any

from runtime.bridge.runner import CrawlSession, _wait_for_release

logger = logging.getLogger("trawl.jobs")

PAUSE_SECONDS = 1.0  # a wake-up later than this means the process itself was not running
STACK_FRAMES = 12  # the reactor's innermost frames in the log and the job's error: the spider's among them
EXIT_CODE = 70  # EX_SOFTWARE: Celery logs the pool process as lost and forks another
# Frames in which the reactor waits for the task thread, not for spider code.
WAITING_ON_PURPOSE = frozenset({CrawlSession.on_item.__code__, _wait_for_release.__code__})


@dataclass(frozen=True)
class Stall:
    silent_for: float  # seconds since the oldest question the reactor did not answer
    stack: str  # the reactor thread's stack when the stall was noticed
    suspects: frozenset[str]  # keys of the crawls whose code is on that stack (or every in-process one)


@dataclass
class WatchedCrawl:
    key: str
    hand_back: Callable[[Stall, bool], None]  # (stall, whether this crawl is a suspect)
    crawler: Callable[[], Any]  # the crawl's Crawler once it runs in this process's reactor, else None


class ReactorWatchdog:
    """One per crawl process. `watching(key, ...)` around each crawl; `start()` once the reactor runs."""

    def __init__(
        self,
        *,
        stall_seconds: float,
        call_in_reactor: Callable[[Callable[[], None]], None],
        ping_seconds: float = 1.0,
        hand_back_seconds: float = 20.0,
        on_stall: Callable[[Stall], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stall_seconds, self.ping_seconds, self.hand_back_seconds = stall_seconds, ping_seconds, hand_back_seconds
        self.call_in_reactor, self.clock = call_in_reactor, clock
        self.on_stall = on_stall or self.recycle
        self.crawls: dict[str, WatchedCrawl] = {}
        self.lock = threading.Lock()
        self.asked_at: float | None = None  # the question the reactor has not answered yet (the reactor clears it)
        self.not_running = 0.0  # of the time since that question, how long the process was not running
        self.reactor_thread: int | None = None  # learnt from its first answer
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None

    @contextmanager
    def watching(
        self, key: str, *, hand_back: Callable[[Stall, bool], None], crawler: Callable[[], Any]
    ) -> Iterator[None]:
        with self.lock:
            self.crawls[key] = WatchedCrawl(key=key, hand_back=hand_back, crawler=crawler)
        try:
            yield
        finally:
            with self.lock:
                self.crawls.pop(key, None)

    def start(self) -> ReactorWatchdog:
        # Asked at once: the reactor is idle now, and answering tells which thread is the reactor's before a crawl
        # queued behind this question can hold it (a new pool process takes its first crawl within a second).
        self.ask()
        self.thread = threading.Thread(target=self._run, name="reactor-watchdog", daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()

    def _run(self) -> None:
        while True:
            before = self.clock()
            if self.stopped.wait(self.ping_seconds):
                return
            self.paused(self.clock() - before - self.ping_seconds)
            stall = self.check()
            if stall is not None:
                self.on_stall(stall)
                return
            self.ask()

    def paused(self, late: float) -> None:
        """This thread woke `late` seconds after it meant to: the whole process was not running (SIGSTOP, a paused
        VM, a C call holding the GIL). Time nobody ran is not the reactor's silence."""
        if late > PAUSE_SECONDS:
            self.not_running += late  # never asked_at itself: the reactor thread may be clearing it right now

    def ask(self) -> None:
        """Ask the reactor to answer, unless a question is still open (a stuck reactor would pile them up)."""
        if self.asked_at is None:
            self.asked_at, self.not_running = self.clock(), 0.0
            self.call_in_reactor(self._answer)

    def _answer(self) -> None:  # in the reactor thread
        self.reactor_thread = threading.get_ident()
        self.asked_at = None

    def silent_for(self) -> float:
        asked = self.asked_at
        return 0.0 if asked is None else max(0.0, self.clock() - asked - self.not_running)

    def check(self) -> Stall | None:
        """A Stall when the reactor has not answered for `stall_seconds` while a crawl is held, and is not waiting
        on purpose; else None."""
        silent = self.silent_for()
        with self.lock:
            crawls = list(self.crawls.values())
        if not crawls or silent < self.stall_seconds:
            return None
        frames = self.reactor_frames()
        if any(frame.f_code in WAITING_ON_PURPOSE for frame in frames):
            return None
        innermost = traceback.extract_stack(frames[0])[-STACK_FRAMES:] if frames else []
        stack = "".join(traceback.format_list(innermost)) if innermost else "(not known)\n"
        return Stall(silent_for=silent, stack=stack, suspects=suspects(frames, crawls))

    def reactor_frames(self) -> list[FrameType]:
        """The reactor thread's frames, innermost first (none before its first answer)."""
        frame = sys._current_frames().get(self.reactor_thread) if self.reactor_thread is not None else None
        frames = []
        while frame is not None:
            frames.append(frame)
            frame = frame.f_back
        return frames

    def hand_back_all(self, stall: Stall) -> None:
        """Each crawl's hand-back, at once and bounded: one that hangs (a database away) does not hold the others,
        and the reaper takes whatever was not handed back (its heartbeat stops with the process)."""
        with self.lock:
            crawls = list(self.crawls.values())
        threads = [
            threading.Thread(target=_hand_back, args=(crawl, stall), name=f"hand-back-{crawl.key}", daemon=True)
            for crawl in crawls
        ]
        for thread in threads:
            thread.start()
        deadline = self.clock() + self.hand_back_seconds
        for thread in threads:
            thread.join(max(0.0, deadline - self.clock()))

    def recycle(self, stall: Stall) -> None:
        """Log, hand every crawl back, end the process: Celery's pool replaces it."""
        logger.error(
            "the reactor has not answered for %.0f s (TRAWL_REACTOR_STALL_SECONDS %g): handing %s crawl(s) back "
            "(suspects: %s) and replacing this process (pid %s). The reactor thread is at:\n%s",
            stall.silent_for,
            self.stall_seconds,
            len(self.crawls),
            ", ".join(sorted(stall.suspects)) or "none",
            os.getpid(),
            stall.stack,
        )
        from project.pools.hosted import host_recycling

        host_recycling("stalled (its reactor did not answer)")  # a crawl host starts no other crawl meanwhile
        self.hand_back_all(stall)
        logging.shutdown()
        os._exit(EXIT_CODE)


def _hand_back(crawl: WatchedCrawl, stall: Stall) -> None:
    try:
        crawl.hand_back(stall, crawl.key in stall.suspects)
    except Exception:
        logger.exception("crawl %s not handed back; the reaper will requeue it", crawl.key)


def suspects(frames: list[FrameType], crawls: list[WatchedCrawl]) -> frozenset[str]:
    """The crawls whose crawler, spider or components (anything holding the crawler) run on the reactor's stack; if
    none does, every crawl running in this reactor (a packaged crawl's spider runs in its child, never here)."""
    running = {crawl.key: crawler for crawl in crawls if (crawler := crawl.crawler()) is not None}
    owners = [frame.f_locals.get("self") for frame in frames]
    found = {
        key
        for key, crawler in running.items()
        if any(_belongs(owner, crawler) for owner in owners if owner is not None)
    }
    return frozenset(found or running)


def _belongs(owner: Any, crawler: Any) -> bool:
    spider = getattr(crawler, "spider", None)
    return owner is crawler or (spider is not None and owner is spider) or getattr(owner, "crawler", None) is crawler
