"""The database calls of Trawl's crawl components, made by a packaged crawl's parent for its child.

A packaged version's child has no database (project.settings_child). Trawl's crawl components read or write it four ways
during a crawl (throttling.crawl_db: loading and checking the throttle's rules, a proxy group's proxies, a blocked
proxy's rest). In the child, ParentDatabase routes those four to calls over the channel (`call` message, `answer`
command); in the worker, `db_call_answer` makes them, for what this crawl may ask only: the child is hostile, so it gets
the proxies of its crawl's groups and may rest only those.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("trawl.packages")
CALL_SECONDS = 60  # an answer the parent has not given by then will not come (it answers between its ticks)
RULES_EVERY = 1.0  # rules and proxies are read at most this often for one crawl, however often it asks


class ParentCallError(Exception):
    """The parent refused or failed the call, or did not answer."""


class ParentDatabase:
    """In the child: database calls sent to the parent. `send(**fields)` writes a `call` message."""

    def __init__(self, send: Callable[..., None]) -> None:
        self.send = send
        self.ids = itertools.count(1)
        self.waiting: dict[int, tuple[threading.Event, dict]] = {}
        self.lock = threading.Lock()

    def call(self, what: str, **args: Any) -> Any:
        """Blocking: from a worker thread (the components call these through asyncio.to_thread)."""
        number, done, answer = next(self.ids), threading.Event(), {}
        with self.lock:
            self.waiting[number] = (done, answer)
        self.send(id=number, what=what, args=args)
        try:
            if not done.wait(CALL_SECONDS):
                raise ParentCallError(f"{what}: no answer from the worker in {CALL_SECONDS}s")
        finally:
            with self.lock:
                self.waiting.pop(number, None)
        if answer.get("error"):
            raise ParentCallError(f"{what}: {answer['error']}")
        return answer.get("value")

    def answered(self, command: dict[str, Any]) -> None:
        """The reader thread got an `answer` command."""
        with self.lock:
            done, answer = self.waiting.get(command.get("id"), (None, None))
        if done is not None:
            answer.update(command)
            done.set()

    def install(self) -> None:
        """Route the components' four database calls here."""
        from throttling.crawl_db import crawl_db_route

        def proxy_rows(*, group: str) -> list:
            return self.call("proxies", group=group)

        def proxy_rest(*, url: str, seconds: float) -> None:
            self.call("proxy_cool_down", url=url, seconds=seconds)

        crawl_db_route(
            rules_load=lambda: bool(self.call("throttle_rules")),
            rules_check=lambda: bool(self.call("throttle_rules_check")),
            proxy_rows=proxy_rows,
            proxy_rest=proxy_rest,
        )


@dataclass
class CallScope:
    """In the worker: what one packaged crawl may ask its parent for."""

    groups: set[str]
    cooldown: float
    proxies: set[str] = field(default_factory=set)  # handed to this crawl: the only ones it may rest
    rules_at: float = float("-inf")
    proxies_read: dict[str, tuple[float, list]] = field(default_factory=dict)  # by group: when, what

    @classmethod
    def of_crawl(cls, *, settings: dict[str, Any], spider_kwargs: dict[str, Any]) -> CallScope:
        group = settings["TRAWL_PROXY_GROUP"]
        config_group = (spider_kwargs.get("config") or {}).get("proxy_group")
        cooldown = float(settings["TRAWL_PROXY_COOLDOWN"])
        return cls(groups={str(group), *([str(config_group)] if config_group else [])}, cooldown=cooldown)


def db_call_answer(message: dict[str, Any], scope: CallScope) -> dict[str, Any]:
    """In the worker: the `answer` command for the child's `call` message."""
    what, args = message.get("what"), message.get("args") if isinstance(message.get("args"), dict) else {}
    try:
        return {"cmd": "answer", "id": message.get("id"), "value": _answer(what, args, scope)}
    except ParentCallError as exc:
        return {"cmd": "answer", "id": message.get("id"), "error": str(exc)}
    except Exception as exc:  # the child's arguments are not to be trusted, nor to break this crawl's task
        logger.warning("package child's %r call failed: %s", what, exc, exc_info=True)
        return {"cmd": "answer", "id": message.get("id"), "error": f"{type(exc).__name__}"}


def _answer(what: Any, args: dict[str, Any], scope: CallScope) -> Any:
    from throttling.crawl_db import crawl_proxy_rest, crawl_proxy_rows, crawl_rules_check, crawl_rules_load

    if what in ("throttle_rules", "throttle_rules_check"):
        if time.monotonic() - scope.rules_at < RULES_EVERY:
            return False  # "someone is loading them": the throttle asks its buckets again a moment later
        scope.rules_at = time.monotonic()
        return crawl_rules_load() if what == "throttle_rules" else crawl_rules_check()
    if what == "proxies":
        if args.get("group") not in scope.groups:
            raise ParentCallError(f"proxy group {args.get('group')!r} is not this crawl's")
        group = args["group"]
        read_at, entries = scope.proxies_read.get(group, (float("-inf"), []))
        if time.monotonic() - read_at >= RULES_EVERY:  # a child asking in a loop does not hammer the database
            entries = crawl_proxy_rows(group=group)
            scope.proxies_read[group] = (time.monotonic(), entries)
            scope.proxies.update(entry[0] for entry in entries)
        return entries
    if what == "proxy_cool_down":
        if args.get("url") not in scope.proxies:
            raise ParentCallError("not a proxy of this crawl")
        seconds = min(float(args.get("seconds") or 0), scope.cooldown)
        crawl_proxy_rest(url=args["url"], seconds=max(seconds, 0.0))
        return None
    raise ParentCallError(f"unknown call {what!r}")
