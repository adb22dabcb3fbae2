"""The guard's check at submission (`target_check`'s rule), for many URLs at once and within a deadline.

A batch may name thousands of hosts; one by one, each slow name (a nameserver that never answers, a resolver's
retries) would hold the web worker past its timeout. Here every distinct host is resolved once, a bounded number at
once, and all of them within TRAWL_SUBMIT_RESOLVE_SECONDS: a host without an answer by then is refused, naming the
field, like a host that does not resolve. Lookups still running at the deadline are left to end on their own (the
resolver's own timeouts bound them); nothing waits for them.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor, wait
from urllib.parse import urlsplit

from django.conf import settings

from project.net import Resolution, allowed_networks, guard_enabled, resolve_checked


def host_of(url: str) -> str:
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


def resolve_within(hosts: Iterable[str]) -> dict[str, Resolution | None]:
    """Each distinct host's checked resolution; None for a host whose answer did not come within the deadline."""
    distinct = sorted({host for host in hosts if host})
    if not distinct:
        return {}
    allowed = allowed_networks()
    workers = max(1, min(int(settings.TRAWL_SUBMIT_RESOLVE_CONCURRENCY), len(distinct)))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="submit-resolve")
    try:
        futures = {pool.submit(resolve_checked, host, allowed=allowed): host for host in distinct}
        done, _ = wait(futures, timeout=float(settings.TRAWL_SUBMIT_RESOLVE_SECONDS))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    answers: dict[str, Resolution | None] = {}
    for future, host in futures.items():
        if future not in done:
            answers[host] = None
        elif future.exception() is not None:  # a resolver fault: no addresses, which the guard refuses
            answers[host] = Resolution(host=host, addresses=(), refused=())
        else:
            answers[host] = future.result()
    return answers


def target_refusal(url: str, resolved: dict[str, Resolution | None]) -> str:
    """Why the guard refuses to call `url` ("" if it may), from answers `resolve_within` gave (asked again, within
    the deadline, for a host it was not given)."""
    host = host_of(url)
    if host not in resolved:
        resolved.update(resolve_within([host]))
    resolution = resolved[host]
    if resolution is None:
        seconds = settings.TRAWL_SUBMIT_RESOLVE_SECONDS
        return f"host {host!r} did not resolve within {seconds:g}s; this server only calls hosts it can check"
    return f"{resolution.reason}; this server only calls public addresses" if resolution.reason else ""


def target_check_within(url: str, *, field: str, resolved: dict[str, Resolution | None] | None = None) -> None:
    """`project.net.target_check` within the submission deadline: a TrawlError naming `field` if the guard is on
    and the URL's host is not a public (or allow-listed) address, or did not resolve in time."""
    if not guard_enabled():
        return
    from project.errors import TrawlError  # DRF: not imported by the crawl side (see project.net.target_check)

    reason = target_refusal(url, {} if resolved is None else resolved)
    if reason:
        raise TrawlError(reason, field=field)
