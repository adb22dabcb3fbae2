"""What a crawl's responses showed of each host (latency, errors), gathered for OBSERVE_SECONDS and then handed to
the adaptive controller in one call, instead of one Redis call per response. An error is also noted at once for the
requests of this process asleep on a token taken ahead (pauses.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from throttling.controller import OBSERVE_SECONDS, Observed
from throttling.pauses import error_seen


class Observations:
    def __init__(self, send: Callable[[str, Observed], None]) -> None:
        self.send = send
        self.pending: dict[str, Observed] = {}  # by host, until its OBSERVE_SECONDS are up

    def add(self, host: str, *, latency: float | None, error: bool) -> None:
        observed = self.pending.get(host)
        if observed is None:
            observed = self.pending[host] = Observed()
            asyncio.get_running_loop().call_later(OBSERVE_SECONDS, self.flush, host)
        observed.add(latency=latency, error=error)
        if error:
            error_seen(host)

    def flush(self, host: str) -> None:
        observed = self.pending.pop(host, None)
        if observed is not None:
            self.send(host, observed)

    def flush_all(self) -> None:
        """What the crawl's last responses said, before their interval is up (the crawl closes)."""
        for host in list(self.pending):
            self.flush(host)
