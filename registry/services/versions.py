"""Registering scrapers and versions, deprecating, promoting, setting traffic.

The admin, the REST API and `manage.py register_version` all write through these functions, so the same rules hold
everywhere: field validation (semver, variant, importable spider, ranges), one version per semver precedence, one
default per scraper, deprecated versions neither default nor taking traffic, and active traffic summing to <= 100.
Every check runs before the first write; a refused request changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils import timezone

from project.errors import TrawlError
from project.messaging.brokers import PRIORITY_MIN
from registry.cache import registry_changed
from registry.errors import RegistryError
from registry.hooks import job_facts
from registry.models import Package, PackageStatus, Scraper, ScraperVersion, Variant
from registry.selectors import traffic_of
from registry.services.validation import allocation_problem, versions_problems

ROLLOUT_FIELDS = ["rollout_started_at", "rolled_back_at", "rollback_reason"]


def scraper_create(*, name: str, description: str = "", settings: dict[str, Any] | None = None) -> Scraper:
    scraper = Scraper(name=name, description=description, settings=settings or {})
    try:
        scraper.full_clean()
    except ValidationError as exc:
        raise RegistryError.from_validation_error(exc, non_field="name") from None
    scraper.save()
    return scraper


@transaction.atomic
def version_create(
    *,
    scraper: Scraper,
    version: str,
    spider: str,
    variant: str = Variant.STABLE,
    is_default: bool = False,
    traffic_pct: int = 0,
    min_priority: int = PRIORITY_MIN,
    settings: dict[str, Any] | None = None,
    package: Package | None = None,
    settings_module: str = "",
) -> ScraperVersion:
    """Register a version. Made the default, it takes over from the previous default. A packaged version (its code
    an uploaded wheel) starts `building`: it routes once a worker built its environment."""
    candidate = ScraperVersion(
        scraper=scraper,
        version=version,
        spider=spider,
        variant=variant,
        is_default=is_default,
        traffic_pct=traffic_pct,
        min_priority=min_priority,
        settings=settings if settings is not None else {},
        package=package,
        package_status=PackageStatus.BUILDING if package is not None else "",
        settings_module=settings_module,
    )
    versions_save(scraper=scraper, versions=[candidate])
    return candidate


@transaction.atomic
def versions_save(
    *, scraper: Scraper, versions: Sequence[ScraperVersion], fields: list[str] | None = None
) -> list[ScraperVersion]:
    """Validate and save versions of one scraper together (the admin's inline, a traffic change, a promotion).

    `fields` limits validation and the UPDATE to those fields (e.g. a traffic change does not re-import spiders).
    """
    _lock(scraper)
    errors = versions_problems(scraper=scraper, versions=versions, fields=fields)
    if errors:
        raise RegistryError(errors)
    now = timezone.now()
    before = {v.pk: v for v in ScraperVersion.objects.filter(pk__in=[v.pk for v in versions if v.pk])}
    refused = _replay_gate(scraper, versions, before)
    if refused:
        raise RegistryError({"version": [refused]})
    for version in versions:
        _track_rollout(version, before.get(version.pk), now)
        _save(version, fields)
    if any(v.is_default for v in versions):
        others = ScraperVersion.objects.filter(scraper=scraper, is_default=True).exclude(
            pk__in=[v.pk for v in versions]
        )
        if others.update(is_default=False):
            registry_changed()  # update() sends no post_save
    total = _active_traffic(scraper)
    if allocation_problem(scraper=scraper, total=total):
        # A backstop: _errors already refused this unless a concurrent write slipped in. Undoes everything above.
        raise RegistryError({"traffic_pct": [allocation_problem(scraper=scraper, total=total)]})
    return list(versions)


@transaction.atomic
def version_deprecate(*, version: ScraperVersion) -> ScraperVersion:
    """Stop routing to a version for good: it takes no traffic and pinned jobs are refused."""
    version = _fresh(version)
    if version.deprecated_at is not None:
        raise TrawlError(f"{version} was already deprecated on {version.deprecated_at:%Y-%m-%d %H:%M}", status_code=409)
    others_active = ScraperVersion.objects.filter(scraper=version.scraper, deprecated_at__isnull=True).exclude(
        pk=version.pk
    )
    if version.is_default and others_active.exists():
        raise TrawlError(
            f"{version.version} is the default of {version.scraper.name!r}: promote another version first",
            field="version",
        )
    version.deprecated_at, version.traffic_pct, version.is_default = timezone.now(), 0, False
    versions_save(scraper=version.scraper, versions=[version], fields=["deprecated_at", "traffic_pct", "is_default"])
    if version.package_id:
        # Imported here: the packages module builds on versions_save. Its machines may now drop the environment.
        from registry.publish import packages_prune_everywhere

        transaction.on_commit(packages_prune_everywhere, robust=True)
    return version


@transaction.atomic
def version_promote(*, version: ScraperVersion) -> ScraperVersion:
    """Make a version the stable default with 100% of traffic; every other active version goes to 0%."""
    version = _fresh(version)
    if version.deprecated_at is not None:
        raise TrawlError(f"{version.version} is deprecated and cannot be promoted", field="version")
    version.variant, version.traffic_pct, version.is_default = Variant.STABLE, 100, True
    changed = [version]
    for other in ScraperVersion.objects.filter(scraper=version.scraper, deprecated_at__isnull=True).exclude(
        pk=version.pk
    ):
        if other.traffic_pct or other.is_default:
            other.traffic_pct, other.is_default = 0, False
            changed.append(other)
    versions_save(scraper=version.scraper, versions=changed, fields=["variant", "traffic_pct", "is_default"])
    return version


@transaction.atomic
def version_make_default(*, version: ScraperVersion) -> ScraperVersion:
    """Make a version the scraper's default (it takes the unpinned jobs no traffic share claims), as a stable deploy
    goes live; the other versions keep their traffic shares."""
    version = _fresh(version)
    if version.deprecated_at is not None:
        raise TrawlError(f"{version.version} is deprecated and cannot be the default", field="version")
    version.is_default = True
    versions_save(scraper=version.scraper, versions=[version], fields=["is_default"])
    return version


@transaction.atomic
def traffic_set(*, scraper: Scraper, allocation: Mapping[str, Any]) -> dict[str, int]:
    """Replace the scraper's traffic split: named versions get their share, other active versions 0%. All or nothing.

    Returns the new split of every active version.
    """
    _lock(scraper)
    if not isinstance(allocation, Mapping) or not allocation:
        raise RegistryError({"traffic": ['send an object of version: percent, e.g. {"1.0.0": 90, "1.1.0": 10}']})
    versions = {v.version: v for v in ScraperVersion.objects.filter(scraper=scraper)}
    errors: dict[str, list[str]] = {}
    for name, pct in allocation.items():
        version = versions.get(name)
        if version is None:
            errors[name] = [f"scraper {scraper.name!r} has no version {name!r}"]
        elif not isinstance(pct, int) or isinstance(pct, bool) or not 0 <= pct <= 100:
            errors[name] = [f"must be a whole number from 0 to 100, got {pct!r}"]
        elif version.deprecated_at is not None and pct:
            errors[name] = ["is deprecated: deprecated versions take no traffic"]
    problem = None if errors else allocation_problem(scraper=scraper, total=sum(allocation.values()))
    if problem:
        errors["traffic_pct"] = [problem]
    if errors:
        raise RegistryError(errors)
    changed = []
    for version in versions.values():
        share = allocation.get(version.version, 0)
        if version.is_active and version.traffic_pct != share:
            version.traffic_pct = share
            changed.append(version)
    versions_save(scraper=scraper, versions=changed, fields=["traffic_pct"])
    # Announced even when nothing changed: re-sending a split resyncs every worker after an edit made behind our back.
    registry_changed()
    return traffic_of(scraper=scraper)


def _replay_gate(scraper: Scraper, versions: Sequence[ScraperVersion], before: dict) -> str:
    """With TRAWL_REPLAY_REQUIRED in the scraper's settings, a version becomes stable or the default only after a clean
    replay of the scraper's latest recorded job (docs/registry.md, "Replay"); the message says what is missing."""
    if not (scraper.settings or {}).get("TRAWL_REPLAY_REQUIRED"):
        return ""
    for version in versions:
        old = before.get(version.pk)
        promoted = (version.is_default and not (old and old.is_default)) or (
            version.variant == Variant.STABLE and not (old and old.variant == Variant.STABLE)
        )
        if not promoted:
            continue
        problem = job_facts().replay_problem(version=version)
        if problem:
            return (
                f"{scraper.name} requires a clean replay before {version.version} becomes stable or the default: "
                f"{problem}"
            )
    return ""


def _lock(scraper: Scraper) -> None:
    # Serializes writes to one scraper's versions, so two concurrent traffic changes cannot together exceed 100%.
    Scraper.objects.select_for_update().filter(pk=scraper.pk).exists()


def _fresh(version: ScraperVersion) -> ScraperVersion:
    _lock(version.scraper)
    return ScraperVersion.objects.select_related("scraper").get(pk=version.pk)


def _active_traffic(scraper: Scraper) -> int:
    active = ScraperVersion.objects.filter(scraper=scraper, deprecated_at__isnull=True)
    return active.aggregate(total=Sum("traffic_pct"))["total"] or 0


def _track_rollout(version: ScraperVersion, before: ScraperVersion | None, now: datetime) -> None:
    """Traffic rising from 0 starts a new rollout: rollback judges only jobs from then, and a past rollback is over."""
    was_live = before is not None and before.traffic_pct > 0 and before.deprecated_at is None
    if version.traffic_pct > 0 and version.deprecated_at is None and not was_live:
        version.rollout_started_at, version.rolled_back_at, version.rollback_reason = now, None, ""


def _save(version: ScraperVersion, fields: list[str] | None) -> None:
    try:
        with transaction.atomic():
            if fields is None or version.pk is None:
                version.save()
            else:
                version.save(update_fields=[*fields, *ROLLOUT_FIELDS])
    except IntegrityError:
        # Only a concurrent registration of the same version gets here; _errors refused every other case.
        raise RegistryError(
            {"version": [f"{version.scraper.name!r} already has a version {version.version!r}"]}
        ) from None
