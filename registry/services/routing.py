"""Choosing the scraper version that runs a job (docs/registry.md, "Routing")."""

from __future__ import annotations

import copy
import random

from project.errors import TrawlError
from project.messaging.brokers import PRIORITY_DEFAULT
from registry.models import PackageStatus, Scraper, ScraperVersion
from registry.selectors import versions_active


class VersionBuilding(TrawlError):
    """Nothing routes yet, but a version that would (the pinned one, or one of those not built) is still building:
    a job may wait for it (crawls.services.build_wait) rather than fail."""


def version_route(
    *,
    scraper: Scraper,
    version: str = "",
    variant: str = "",
    priority: int = PRIORITY_DEFAULT,
    rng: random.Random | None = None,
) -> ScraperVersion:
    """Exact version if asked; else the latest of the asked variant; else weighted by traffic; else the default.

    Only active (not deprecated) versions ever route. A pin that cannot be honoured is an error, never a silent
    substitute. Raises TrawlError naming the field when nothing matches; the job then fails with `routing`
    (VersionBuilding when a package still building may yet match).
    """
    active = versions_active(scraper=scraper)
    chosen = route_pick(active, scraper=scraper.name, version=version, variant=variant, priority=priority, rng=rng)
    # The cached instances are shared by every job of this process; callers get their own copy.
    return copy.deepcopy(chosen)


def route_pick(
    active: list[ScraperVersion],
    *,
    scraper: str,
    version: str = "",
    variant: str = "",
    priority: int = PRIORITY_DEFAULT,
    rng: random.Random | None = None,
) -> ScraperVersion:
    """The routing rule itself, over active versions sorted newest first. Pure: no I/O.

    A packaged version routes only once its package is ready (built, spider importable); until then it is as if
    it were not there, and a pin to it is refused saying why.
    """
    if version:
        for candidate in active:
            if candidate.version == version and not candidate.routable:
                raise _refused(candidate.package_status == PackageStatus.BUILDING)(
                    _unroutable(scraper, candidate), field="version"
                )
            if candidate.version == version:
                return candidate
        raise TrawlError(f"scraper {scraper!r} has no active version {version!r}", field="version")
    # Packaged versions still building or failed: named when nothing else routes, so the job says why.
    unbuilt = [candidate for candidate in active if not candidate.routable]
    waiting = "".join(f"; {_unroutable(scraper, candidate)}" for candidate in unbuilt)
    building = {candidate.variant for candidate in unbuilt if candidate.package_status == PackageStatus.BUILDING}
    active = [candidate for candidate in active if candidate.routable]
    if variant:
        for candidate in active:
            if candidate.variant == variant:
                return candidate
        raise _refused(variant in building)(
            f"scraper {scraper!r} has no active {variant!r} version{waiting}", field="variant"
        )
    default = next((v for v in active if v.is_default), None)
    eligible = [v for v in active if v.traffic_pct > 0 and v.min_priority <= priority]
    if eligible:
        # traffic_pct is a share of all unpinned jobs: what no eligible version claims goes to the default.
        # Without a default the eligible versions share everything by weight.
        span = 100 if default is not None else sum(v.traffic_pct for v in eligible)
        pick = (rng or random).random() * span
        for candidate in eligible:
            pick -= candidate.traffic_pct
            if pick < 0:
                return candidate
    if default is not None:
        return default
    raise _refused(bool(building))(
        f"scraper {scraper!r} has no version to route to: no active default version and no active version with "
        f"traffic for priority {priority}{waiting}",
        field="scraper",
    )


def _refused(building: bool) -> type[TrawlError]:
    """What nothing routing raises: VersionBuilding when a version still building may yet route the job."""
    return VersionBuilding if building else TrawlError


def _unroutable(scraper: str, version: ScraperVersion) -> str:
    if version.package_status == PackageStatus.FAILED:
        return f"the package of {scraper!r} {version.version} failed to build: {version.build_failure}"
    return f"the package of {scraper!r} {version.version} is still {version.package_status or 'not built'}"


def route_shares(versions: list[ScraperVersion]) -> dict[str, float]:
    """The share (percent) of unpinned jobs each version takes, as route_pick splits them (for jobs whose priority
    every version accepts): traffic_pct for each, and what they leave to the default; without a default, the versions
    with traffic share everything by weight. Deprecated and not-yet-routable versions take nothing."""
    routable = [v for v in versions if v.is_active and v.routable]
    default = next((v for v in routable if v.is_default), None)
    weighted = [v for v in routable if v.traffic_pct > 0 and v is not default]
    shares = {v.version: 0.0 for v in routable}
    if default is not None:
        shares.update({v.version: float(v.traffic_pct) for v in weighted})
        shares[default.version] = float(max(0, 100 - sum(v.traffic_pct for v in weighted)))
    elif weighted:
        total = sum(v.traffic_pct for v in weighted)
        shares.update({v.version: round(100 * v.traffic_pct / total, 1) for v in weighted})
    return shares
