"""The one place a job and its routed version become the runtime's description of the crawl (runtime.spec)."""

from __future__ import annotations

from typing import Any

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


def spider_kwargs(job: CrawlJob, *, args: dict[str, str]) -> dict[str, Any]:
    """Every spider gets the job's URL as `url` and `start_urls` (none when the job has no URL: a named spider starts
    from its own start_urls), `options`, the merged source `config`, and the source's `strategy` ("deep" for a job
    without a source); then the job's spider arguments, as `scrapy crawl -a` passes them. Trawl's own come last: an
    argument never replaces one (the checks refuse their names too)."""
    config = dict(job.source.config) if job.source_id else {}
    config.update((job.options or {}).get("config") or {})
    strategy = job.source.strategy if job.source_id else "deep"
    options = job.options or {}
    start = {"url": job.url, "start_urls": [job.url]} if job.url else {}
    trawl = {**start, "options": options, "config": config, "strategy": strategy}
    return {**args, **trawl}
