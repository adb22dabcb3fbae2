"""Monitors: what a finished crawl is expected to look like (TRAWL_MONITORS), as small pure rules. No I/O.

A scraper, a version or a source declares them, later layers overriding earlier ones monitor by monitor:
`{"min_items": 10, "max_error_rate": 0.2, "min_coverage": {"price": 0.95}, "max_items_drop": 0.5}`, each value
optionally `{"value": ..., "fail": true}` to fail the job (error class `monitor`) instead of only alerting.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

from project.errors import TrawlError

FIELD = "TRAWL_MONITORS"
NAMES = ("min_items", "max_error_rate", "min_coverage", "max_items_drop")


@dataclass(frozen=True)
class Monitor:
    name: str
    value: Any
    fail: bool = False


@dataclass(frozen=True)
class Breach:
    monitor: str
    expected: Any
    actual: Any
    fail: bool = False

    def as_alert(self) -> dict[str, Any]:
        return {"monitor": self.monitor, "expected": self.expected, "actual": self.actual}


def monitors_parse(*layers: Mapping[str, Any] | None) -> dict[str, Monitor]:
    """Merge TRAWL_MONITORS layers (later wins per monitor) and check them; TrawlError names what is wrong."""
    merged: dict[str, Any] = {}
    for layer in layers:
        if layer is None:
            continue
        if not isinstance(layer, Mapping):
            raise TrawlError(f"{FIELD} must be an object like {{'min_items': 10}}", field=FIELD)
        merged.update(layer)
    return {name: _monitor(name, spec) for name, spec in merged.items()}


def monitors_valid(value: Mapping[str, Any]) -> None:
    """Validator of a settings or config dict: its TRAWL_MONITORS, if any, must parse (Django ValidationError)."""
    try:
        monitors_parse(value.get(FIELD))
    except TrawlError as exc:
        raise ValidationError(exc.message) from None


def _monitor(name: str, spec: Any) -> Monitor:
    if name not in NAMES:
        raise TrawlError(f"{FIELD}: unknown monitor {name!r} (known: {', '.join(NAMES)})", field=FIELD)
    fail = False
    if isinstance(spec, Mapping) and "value" in spec:
        fail, spec = bool(spec.get("fail", False)), spec["value"]
    if name == "min_coverage":
        if not isinstance(spec, Mapping) or not all(_share(share) for share in spec.values()):
            raise TrawlError(f"{FIELD}: min_coverage maps fields to shares 0..1, e.g. {{'price': 0.95}}", field=FIELD)
        return Monitor(name, {str(field): float(share) for field, share in spec.items()}, fail)
    if name == "min_items" and not (isinstance(spec, int) and not isinstance(spec, bool) and spec >= 0):
        raise TrawlError(f"{FIELD}: min_items is a whole number, got {spec!r}", field=FIELD)
    if name != "min_items" and not _share(spec):
        raise TrawlError(f"{FIELD}: {name} is a share between 0 and 1, got {spec!r}", field=FIELD)
    return Monitor(name, spec, fail)


def _share(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1


def error_rate(stats: Mapping[str, Any]) -> float | None:
    """Failed downloads and error responses (>= 400; followed redirects are not errors) per request sent."""
    requests = stats.get("requests") or 0
    if requests <= 0:
        return None
    bad = sum(count for code, count in (stats.get("status_codes") or {}).items() if not 200 <= int(code) < 400)
    bad += sum((stats.get("download_errors") or {}).values())
    return round(min(1.0, bad / requests), 4)


def coverage(scrapy_stats: Mapping[str, Any]) -> dict[str, float]:
    """Share of scraped items with a non-empty value per field, from FieldCoverage's `coverage/*` stats."""
    items = scrapy_stats.get("coverage/items") or 0
    if not items:
        return {}
    prefix = "coverage/field/"
    return {key.removeprefix(prefix): round(n / items, 4) for key, n in scrapy_stats.items() if key.startswith(prefix)}


def monitors_check(
    monitors: Mapping[str, Monitor],
    *,
    stats: Mapping[str, Any],
    field_coverage: Mapping[str, float],
    history: Sequence[int] = (),
) -> list[Breach]:
    """Every monitor the finished crawl breaches. `history`: items of the source's recent successful runs."""
    breaches: list[Breach] = []
    items = int(stats.get("items", stats.get("items_scraped", 0)) or 0)
    for monitor in monitors.values():
        if monitor.name == "min_items" and items < monitor.value:
            breaches.append(Breach("min_items", monitor.value, items, monitor.fail))
        elif monitor.name == "max_error_rate":
            rate = error_rate(stats)
            if rate is not None and rate > monitor.value:
                breaches.append(Breach("max_error_rate", monitor.value, rate, monitor.fail))
        elif monitor.name == "min_coverage" and items:
            breaches.extend(_coverage_breaches(monitor, field_coverage))
        elif monitor.name == "max_items_drop":
            drop = items_drop(items, history)
            if drop is not None and drop > monitor.value:
                breaches.append(Breach("max_items_drop", monitor.value, drop, monitor.fail))
    return breaches


def _coverage_breaches(monitor: Monitor, field_coverage: Mapping[str, float]) -> list[Breach]:
    return [
        Breach(f"min_coverage.{field}", share, field_coverage.get(field, 0.0), monitor.fail)
        for field, share in monitor.value.items()
        if field_coverage.get(field, 0.0) < share
    ]


def items_drop(items: int, history: Sequence[int]) -> float | None:
    """How far below the median of earlier runs this run's items are (0.4 = 40 % fewer); None without a baseline."""
    if not history:
        return None
    median = statistics.median(history)
    if median <= 0:
        return None
    return round(max(0.0, 1 - items / median), 4)
