"""What a crawl's responses showed of each host (latency, errors), gathered for OBSERVE_SECONDS and then handed to
the adaptive controller in one call, instead of one Redis call per response. A batch that holds an error goes within
ERROR_OBSERVE_SECONDS: a window with errors closes in a fraction of its time (throttling/adaptive.py), and waiting
the full interval would delay the slowdown it calls for. An error is also noted at once for the requests of this
process asleep on a token taken ahead (pauses.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from throttling.controller import ERROR_OBSERVE_SECONDS, OBSERVE_SECONDS, Observed
from throttling.pauses import error_seen


class Observations:
    def __init__(self, send: Callable[[str, Observed], None]) -> None:
        self.send = send
        # by host, until its interval is up: what was seen, and the call that sends it
        self.pending: dict[str, tuple[Observed, asyncio.TimerHandle]] = {}

    def add(self, host: str, *, latency: float | None, error: bool) -> None:
        loop = asyncio.get_running_loop()
        observed, timer = self.pending.get(host) or (Observed(), None)
        if timer is None:
            timer = loop.call_later(OBSERVE_SECONDS, self.flush, host)
        observed.add(latency=latency, error=error)
        if error:
            error_seen(host)
            if timer.when() > loop.time() + ERROR_OBSERVE_SECONDS:
                timer.cancel()
                timer = loop.call_later(ERROR_OBSERVE_SECONDS, self.flush, host)
        self.pending[host] = (observed, timer)

    def flush(self, host: str) -> None:
        observed, timer = self.pending.pop(host, (None, None))
        if observed is not None:
            timer.cancel()  # when the crawl closes before the interval is up
            self.send(host, observed)

    def flush_all(self) -> None:
        """What the crawl's last responses said, before their interval is up (the crawl closes)."""
        for host in list(self.pending):
            self.flush(host)
