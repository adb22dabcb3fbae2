"""Packaged versions: registering one from an uploaded wheel, recording its build, telling workers to prune.

The wheel is read and checked before anything is written; the version row is validated by the same rules as any
other version (`versions_save`); the file goes to storage last, inside the transaction, so a refused request leaves
neither a row nor a file (a file written just before a failed commit is harmless: it is named by its content and
reused by the next upload of the same wheel).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import IO, Any

from django.conf import settings as conf
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.db import transaction

from project.errors import TrawlError
from project.messaging.brokers import PRIORITY_MIN
from registry import hooks
from registry.cache import registry_changed
from registry.errors import RegistryError
from registry.models import Package, PackageStatus, Scraper, ScraperVersion, Variant
from registry.packages.wheels import WheelInfo, spider_problem, wheel_inspect, wheel_read
from registry.publish import publish_package_build
from registry.selectors import versions_of
from registry.services.versions import version_create, version_make_default

logger = logging.getLogger("trawl.packages")


@transaction.atomic
def version_upload(
    *,
    scraper: Scraper,
    package: IO[bytes],
    filename: str,
    version: str,
    spider: str,
    variant: str = Variant.STABLE,
    is_default: bool = False,
    traffic_pct: int = 0,
    min_priority: int = PRIORITY_MIN,
    settings: dict[str, Any] | None = None,
    settings_module: str = "",
) -> ScraperVersion:
    """Register a version whose code is an uploaded wheel. It routes once a worker built it (`package_status`).
    `settings_module`: the Scrapy project's settings module inside the wheel, applied to its jobs beneath the
    version's settings (runtime.settings.project)."""
    data = wheel_read(file=package, max_bytes=conf.TRAWL_PACKAGE_MAX_BYTES)
    info = wheel_inspect(data=data, filename=filename)
    problem = spider_problem(info=info, spider=spider)
    if problem:
        raise RegistryError({"spider": [problem]})
    if settings_module and settings_module not in info.modules:
        raise RegistryError({"settings_module": [f"module {settings_module!r} is not in {info.filename}"]})
    stored = _package_row(info)
    candidate = version_create(
        scraper=scraper,
        version=version,
        spider=spider,
        variant=variant,
        is_default=is_default,
        traffic_pct=traffic_pct,
        min_priority=min_priority,
        settings=settings,
        package=stored,
        settings_module=settings_module,
    )
    _package_write(stored, data)
    transaction.on_commit(lambda: publish_package_build(version_id=candidate.pk), robust=True)
    return candidate


def _package_row(info: WheelInfo) -> Package:
    package, _ = Package.objects.get_or_create(
        sha256=info.sha256,
        defaults={
            "path": f"{info.sha256}/{info.filename}",
            "filename": info.filename,
            "name": info.name,
            "dist_version": info.version,
            "requires": info.requires,
            "size": info.size,
        },
    )
    return package


def _package_write(package: Package, data: bytes) -> None:
    storage = storages[conf.TRAWL_PACKAGE_STORAGE]
    if not storage.exists(package.path):
        saved = storage.save(package.path, ContentFile(data))
        if saved != package.path:  # another upload of the same wheel won a race: keep one copy
            storage.delete(saved)


def version_package_record(*, version_id: int, status: str, log: str, spiders: dict[str, str] | None = None) -> None:
    """The build's verdict. `log` starts with the one-line reason when it failed; `spiders`, the project's spiders
    by name as the build found them."""
    found = {"spiders": spiders} if spiders is not None else {}
    with transaction.atomic():  # a failed default and its successor change together: routing never sees one alone
        ScraperVersion.objects.filter(pk=version_id).update(package_status=status, package_log=log, **found)
        registry_changed()  # update() sends no post_save: every worker re-reads which versions may route
        if status == PackageStatus.FAILED:
            _default_handed_back(version_id=version_id)
    logger.info("version %s package %s", version_id, status)


def _default_handed_back(*, version_id: int) -> None:
    """A default whose build failed gives the default back to the newest version that runs (stable first), as
    scrapyd keeps running the last good upload when a new one does not load: a scrapyd deploy makes its version the
    default at upload, and without this one broken deploy left the scraper with nothing to route to."""
    failed = ScraperVersion.objects.select_for_update().filter(pk=version_id, is_default=True).first()
    if failed is None:
        return
    runnable = [v for v in versions_of(scraper=failed.scraper) if v.is_active and v.routable and v.pk != failed.pk]
    fallback = next((v for v in runnable if v.variant == Variant.STABLE), runnable[0] if runnable else None)
    if fallback is None:
        return
    try:
        version_make_default(version=fallback)
    except (RegistryError, TrawlError) as exc:  # the registry's own rules refuse it: the failed build stays recorded
        logger.warning("%s: %s stays without a default (%s)", failed.scraper.name, fallback.version, exc)
        return
    logger.warning(
        "%s %s failed to build: %s is the default again", failed.scraper.name, failed.version, fallback.version
    )


def packages_unused(sha256s: Iterable[str]) -> set[str]:
    """Of these package hashes, those no worker needs any more: every version using it is deprecated and none of
    those versions has a running job (or no version uses it at all)."""
    sha256s = set(sha256s)
    needed = set(
        ScraperVersion.objects.filter(package__sha256__in=sha256s, deprecated_at__isnull=True).values_list(
            "package__sha256", flat=True
        )
    )
    needed.update(hooks.job_facts().packages_running(sha256s))
    return sha256s - needed
