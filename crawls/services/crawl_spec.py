"""The one place a job and its routed version become the runtime's description of the crawl (runtime.spec)."""

from __future__ import annotations

from crawls.models import CrawlJob
from registry.models import Package, ScraperVersion
from runtime.spec import CrawlSpec, PackageSpec


def crawl_spec_build(*, job: CrawlJob, version: ScraperVersion) -> CrawlSpec:
    return CrawlSpec(
        job_id=str(job.pk),
        attempt=job.attempt,
        url=job.url,
        scraper=version.scraper.name,
        version=version.version,
        spider=version.spider,
        options=dict(job.options or {}),
        args=dict(job.args or {}),
        source_id=job.source_id,
        source_config=dict(job.source.config or {}) if job.source_id else {},
        guarded=bool(job.requester_id and not job.requester.is_admin),
        scraper_settings=dict(version.scraper.settings or {}),
        version_settings=dict(version.settings or {}),
        package=package_spec_of(version.package) if version.package_id else None,
    )


def package_spec_of(package: Package) -> PackageSpec:
    return PackageSpec(sha256=package.sha256, path=package.path, filename=package.filename)
