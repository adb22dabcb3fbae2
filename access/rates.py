"""API rates as DRF writes them (`"600/minute"`), parsed without DRF: settings are checked in every process as it
starts (access.apps), and a crawl worker never loads DRF."""

from __future__ import annotations

PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def rate_parse(rate: str) -> tuple[int, int] | None:
    """`"600/minute"` → (600, 60): DRF's notation (second, minute, hour, day; the first letter counts). Empty: None,
    no limit. A malformed rate raises ValueError (settings check it as a process starts)."""
    if not rate:
        return None
    count, _, period = rate.partition("/")
    if not (count.strip().isascii() and count.strip().isdigit()) or period.strip()[:1] not in PERIODS:
        raise ValueError(f"an API rate is N/second, N/minute, N/hour or N/day, got {rate!r}")
    return int(count), PERIODS[period.strip()[0]]
