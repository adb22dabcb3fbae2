"""The reactor watchdog (runtime.bridge.watchdog) against this process's real reactor, held by code running in it:
a silent reactor while a crawl is held is a stall naming the crawl on its stack; waiting for the task thread is not."""

from __future__ import annotations

import queue
import threading
import time

import pytest

from runtime.bridge.reactor import ensure_reactor
from runtime.bridge.runner import CrawlSession
from runtime.bridge.watchdog import PAUSE_SECONDS, ReactorWatchdog

STALL = 0.5
DEADLINE = 30  # a generous poll deadline, never the thing asserted


class Crawler:
    """Stands for a crawl's crawler: its method holding the reactor puts it on the reactor's stack as `self`."""

    def __init__(self) -> None:
        self.spider = object()
        self.holding = threading.Event()

    def hold(self, release: threading.Event) -> None:
        self.holding.set()
        release.wait(DEADLINE)


def poll(condition, deadline: float = DEADLINE) -> None:
    end = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < end, "not within the poll deadline"
        time.sleep(0.02)


@pytest.fixture
def reactor():
    ensure_reactor()
    from twisted.internet import reactor

    return reactor


@pytest.fixture
def watchdog(reactor):
    stalls = []
    dog = ReactorWatchdog(stall_seconds=STALL, ping_seconds=0.05, call_in_reactor=reactor.callFromThread)
    dog.on_stall = stalls.append
    dog.stalls = stalls
    yield dog
    dog.stop()


@pytest.fixture
def held(reactor):
    """Hold the reactor with `Crawler.hold` (released at the end, even on failure)."""
    release = threading.Event()

    def hold(crawler: Crawler) -> None:
        reactor.callFromThread(crawler.hold, release)

    yield hold
    release.set()


def answered_once(dog: ReactorWatchdog) -> None:
    dog.ask()
    poll(lambda: dog.reactor_thread is not None and dog.asked_at is None)


def test_a_reactor_held_while_crawls_run_is_a_stall_naming_the_crawl_on_its_stack(watchdog, held):
    culprit, bystander, packaged = Crawler(), Crawler(), None
    handed = []
    with (
        watchdog.watching(
            "culprit", hand_back=lambda s, suspect: handed.append(("culprit", suspect)), crawler=lambda: culprit
        ),
        watchdog.watching(
            "bystander", hand_back=lambda s, suspect: handed.append(("by", suspect)), crawler=lambda: bystander
        ),
        watchdog.watching(
            "packaged", hand_back=lambda s, suspect: handed.append(("pk", suspect)), crawler=lambda: packaged
        ),
    ):
        answered_once(watchdog)
        watchdog.start()
        held(culprit)
        poll(lambda: watchdog.stalls)
        stall = watchdog.stalls[0]
        watchdog.hand_back_all(stall)

    assert stall.suspects == {"culprit"}
    assert stall.silent_for >= STALL
    assert "in hold" in stall.stack and "release.wait" in stall.stack
    assert sorted(handed) == [("by", False), ("culprit", True), ("pk", False)]


def test_without_a_crawl_on_its_stack_every_in_process_crawl_is_a_suspect(watchdog, held):
    stranger, crawling = Crawler(), Crawler()
    with watchdog.watching("crawl", hand_back=lambda *_: None, crawler=lambda: crawling):
        answered_once(watchdog)
        watchdog.start()
        held(stranger)
        poll(lambda: watchdog.stalls)

    assert watchdog.stalls[0].suspects == {"crawl"}


def test_a_silent_reactor_is_no_stall_while_no_crawl_is_held_and_one_as_soon_as_one_is(watchdog, held):
    answered_once(watchdog)
    held(Crawler())
    watchdog.ask()
    poll(lambda: watchdog.silent_for() >= STALL)

    assert watchdog.check() is None
    with watchdog.watching("late", hand_back=lambda *_: None, crawler=lambda: None):
        stall = watchdog.check()
    assert stall is not None and stall.suspects == frozenset()  # it had not started: a bystander


def test_the_reactor_thread_is_known_before_the_first_crawl_can_hold_it(watchdog, held):
    """A new pool process takes its first crawl at once: the question asked as the watchdog starts is answered
    before the crawl queued behind it starts, so the stall's stack is the reactor's."""
    watchdog.ping_seconds = DEADLINE  # no later question: only the one asked at start
    crawler = Crawler()
    with watchdog.watching("first", hand_back=lambda *_: None, crawler=lambda: crawler):
        watchdog.start()
        held(crawler)
        poll(lambda: watchdog.reactor_thread is not None and watchdog.asked_at is None)  # answered before the hold
        poll(crawler.holding.is_set)
        watchdog.asked_at = time.monotonic() - STALL  # as if asked again, unanswered since
        stall = watchdog.check()

    assert stall is not None and "in hold" in stall.stack and stall.suspects == {"first"}


def test_time_the_whole_process_was_paused_is_not_the_reactors_silence(watchdog, held):
    """SIGSTOP, a paused VM: on waking, the reactor has not answered for as long as nobody ran, the watchdog's own
    wake-up as late. That time is discounted: only silence the watchdog was awake for counts."""
    crawler = Crawler()
    with watchdog.watching("crawl", hand_back=lambda *_: None, crawler=lambda: crawler):
        answered_once(watchdog)
        held(crawler)
        watchdog.ask()
        poll(lambda: watchdog.silent_for() >= PAUSE_SECONDS + STALL)
        watchdog.paused(watchdog.silent_for())  # as if this thread too had woken that late

        assert watchdog.check() is None
        poll(lambda: watchdog.silent_for() >= STALL)
        assert watchdog.check() is not None  # silent again for as long while awake: a stall


def test_an_answering_reactor_is_never_a_stall(watchdog):
    with watchdog.watching("crawl", hand_back=lambda *_: None, crawler=Crawler):
        for _ in range(3):
            answered_once(watchdog)
            assert watchdog.check() is None


def test_the_reactor_waiting_for_the_task_thread_to_drain_items_is_not_a_stall(watchdog, reactor):
    """Backpressure: the database lags, the item queue is full, the reactor waits in `on_item` (bounded by the
    crawl's infrastructure patience, not by the watchdog)."""
    session = CrawlSession(items=queue.Queue(maxsize=1))
    session.items.put({})
    with watchdog.watching("crawl", hand_back=lambda *_: None, crawler=Crawler):
        answered_once(watchdog)
        reactor.callFromThread(session.on_item, {"waiting": True})
        watchdog.ask()
        try:
            poll(lambda: watchdog.silent_for() >= STALL)
            assert watchdog.check() is None
        finally:
            session.abandoned = True
        poll(lambda: watchdog.asked_at is None)


def test_a_hand_back_that_hangs_does_not_hold_the_others(watchdog):
    handed, hanging = [], threading.Event()
    watchdog.hand_back_seconds = 0.2
    with (
        watchdog.watching("hangs", hand_back=lambda *_: hanging.wait(DEADLINE), crawler=lambda: None),
        watchdog.watching("fine", hand_back=lambda *_: handed.append("fine"), crawler=lambda: None),
    ):
        from runtime.bridge.watchdog import Stall

        try:
            watchdog.hand_back_all(Stall(silent_for=STALL, stack="", suspects=frozenset()))
        finally:
            hanging.set()

    assert handed == ["fine"]
