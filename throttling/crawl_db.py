"""The database calls the throttle and proxy rotation make during a crawl, always from a thread, never the reactor.

Four: the throttle mirrors its rules into Redis when the mirror is stale (throttle_rules_load) and checks them against
the database now and then (throttle_rules_check), proxy rotation reads its group's proxies (proxies_load) and rests a
proxy a site blocked (proxy_cool_down). A packaged crawl's child has no database, and its Redis user may not write
the mirror: it routes the four to its worker (`crawl_db_route`), which makes them with the functions here for it
(runtime.packaged.child_db, which also decides what that crawl may ask).
"""

from __future__ import annotations

from collections.abc import Callable

import throttling.services
from throttling.models import Proxy
from throttling.proxies import ProxyEntry, ProxyRotationMiddleware


def crawl_rules_load() -> bool:
    """Mirror the throttle rules into Redis; False when another process is loading them."""
    return throttling.services.throttle_rules_load()


def crawl_rules_check() -> bool:
    """Reload the mirror if the database's rules changed behind the services' back (at most one process a period)."""
    return throttling.services.throttle_rules_check()


def crawl_proxy_rows(*, group: str) -> list[list]:
    """The group's enabled proxies as rows a channel carries: [url, egress label, cooling-down-until (unix time, 0
    when not resting)]. Unlike proxies_load, leaves the thread's connections open: the caller's thread (a packaged
    crawl's task thread) writes the job with its own."""
    rows = Proxy.objects.filter(enabled=True, group=group).order_by("egress_label", "url")
    return [
        [row.url, row.egress_label, row.cooling_down_until.timestamp() if row.cooling_down_until else 0.0]
        for row in rows
    ]


def crawl_proxy_rest(*, url: str, seconds: float) -> None:
    throttling.services.proxy_cool_down(url=url, seconds=seconds)


def crawl_db_route(
    *,
    rules_load: Callable[[], bool],
    rules_check: Callable[[], bool],
    proxy_rows: Callable[..., list],
    proxy_rest: Callable[..., None],
) -> None:
    """From now on, this process's throttle and proxy rotation make their four calls through these (same keywords
    and rows as the functions above)."""

    def proxies(*, group: str) -> list[ProxyEntry]:
        return [ProxyEntry(*row) for row in proxy_rows(group=group)]

    throttling.services.throttle_rules_load = rules_load
    throttling.services.throttle_rules_check = rules_check
    throttling.services.proxy_cool_down = proxy_rest
    # Bound as the default of the middleware's `load` argument, which proxy_options() never sets.
    ProxyRotationMiddleware.__init__.__kwdefaults__["load"] = proxies
