"""The one place a job and its routed version become the runtime's description of the crawl (runtime.spec)."""

from __future__ import annotations

from crawls.models import CrawlJob
from project.errors import TrawlError
from registry.models import Package, ScraperVersion
from runtime.spec import CrawlSpec, PackageSpec


def crawl_spec_build(*, job: CrawlJob, version: ScraperVersion) -> CrawlSpec:
    return CrawlSpec(
        job_id=str(job.pk),
        attempt=job.attempt,
        url=job.url,
        scraper=version.scraper.name,
        version=version.version,
        spider=spider_path_of(job=job, version=version),
        options=dict(job.options or {}),
        args=dict(job.args or {}),
        source_id=job.source_id,
        source_config=dict(job.source.config or {}) if job.source_id else {},
        guarded=bool(job.requester_id and not job.requester.is_admin),
        scraper_settings=dict(version.scraper.settings or {}),
        version_settings=dict(version.settings or {}),
        package=package_spec_of(version.package) if version.package_id else None,
        settings_module=version.settings_module,
    )


def spider_path_of(*, job: CrawlJob, version: ScraperVersion) -> str:
    """The dotted path of the spider the job runs: the one it names by its Scrapy `name` among the version's spiders
    (found when its package was built), else the version's own. An in-process version's own spider is checked by
    its name once loaded (crawls.services.execution). Raises TrawlError naming `spider`."""
    if not job.spider:
        return version.spider
    found = (version.spiders or {}).get(job.spider)
    if found:
        return found
    if not version.spiders and not version.package_id:
        return version.spider
    names = ", ".join(sorted(version.spiders or {})) or "-"
    raise TrawlError(f"{version} has no spider named {job.spider!r} (it has: {names})", field="spider")


def package_spec_of(package: Package) -> PackageSpec:
    return PackageSpec(sha256=package.sha256, path=package.path, filename=package.filename)
