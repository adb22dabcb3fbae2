"""Orchestration: one `run_crawl` message, top to bottom — claim (or join), route the version, crawl, outcome.

While the crawl runs, each tick stores its items (crawls.services.ingestion) and keeps it alive or stops it
(crawls.services.liveness); every change of the job's status is crawls.services.lifecycle's.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import redis
from django.conf import settings
from django.utils import timezone

from crawls import hooks
from crawls.live.cancel import cancel_requested
from crawls.logs.error_pages import job_error_pages_store
from crawls.logs.joblog import job_log_capture
from crawls.models import CrawlJob, ErrorClass, JobStatus
from crawls.replays.recordings import job_recording_store
from crawls.services.build_wait import BuildWaitStopped, routed_when_built
from crawls.services.crawl_spec import crawl_spec_build, spider_kwargs, spider_path_of
from crawls.services.ingestion import ItemIngest
from crawls.services.jobs import job_claim_message
from crawls.services.lifecycle import AttemptCause, job_attempt_over, job_end
from crawls.services.liveness import DATABASE_UNAVAILABLE, CrawlTick, database_reconnect, heartbeat_kept
from crawls.services.monitoring import job_monitors, job_outcome_monitored
from crawls.services.screenshots import job_screenshots_store
from crawls.services.shards import Shard
from crawls.timeouts import job_timeout
from crawls.worker.shutdown import crawling
from crawls.worker.stalls import reactor_watched
from project.errors import InfrastructureUnavailable, TrawlError
from project.pools.memory import crawl_weighed
from project.sentry import sentry_job_tags
from registry.services import version_route
from registry.services.packages import packages_unused
from registry.spiders import SpiderImportError, spider_load
from runtime.bridge.logcapture import job_log_flush, job_log_level
from runtime.bridge.outcome import classify, job_stats
from runtime.bridge.runner import run_spider
from runtime.frontier import FrontierLost
from runtime.packaged.children import PackageUnavailable
from runtime.packaged.run import package_run
from runtime.rendering.screenshots import screenshots_drain
from runtime.replay.record import recording_drain
from runtime.settings.compose import child_pool, project_layer_for, scrapy_settings_for
from runtime.spec import CrawlSpec
from runtime.watch.budget import closed_by
from runtime.watch.error_pages import error_pages_drain

logger = logging.getLogger("trawl.jobs")
# Trawl's own database or Redis being unreachable or restarting: requeue the job, never blame the site.
INFRASTRUCTURE_ERRORS = (*DATABASE_UNAVAILABLE, redis.RedisError, InfrastructureUnavailable)
TICK_SECONDS = 0.5  # how often the task thread drains items and reads the cancel flag: a cancel lands within ~1 s


def job_execute(
    *, job_id: str, attempt: int, worker: str, slot_soft_limit: float | None = None, shard: int = 0
) -> dict[str, Any]:
    """Run a job end to end. Crawl failures are returned in the result, never raised (the task raises them).

    The message is a slot at its priority: the job that runs may be another requester's (crawls/fairshare.py).
    A shard message (`shard` > 0) is not a slot: it joins its own job, a parallel one already running."""
    job = job_claim_message(job_id=job_id, attempt=attempt, worker=worker, shard=shard, slot_soft_limit=slot_soft_limit)
    if job is None:
        current, url = CrawlJob.objects.filter(pk=job_id).values_list("status", "url").first() or ("missing", "")
        logger.info("job %s attempt %s shard %s not claimed (status %s)", job_id, attempt, shard, current)
        return {"status": current, "url": url, "job_id": str(job_id), "claimed": False}
    captured = job_log_capture(job_id=job.pk, attempt=job.attempt, shard=shard)
    with captured, heartbeat_kept(job=job), crawling():
        try:
            return _job_run(job=job, worker=worker, shard=shard)
        except INFRASTRUCTURE_ERRORS as exc:
            # Trawl's own Redis or database failed: requeue, never blame the site (no error class, no backoff).
            logger.warning("job %s: Trawl's infrastructure failed", job.pk, exc_info=True)
            if isinstance(exc, DATABASE_UNAVAILABLE):
                database_reconnect()
            cause = AttemptCause.FRONTIER_LOST if isinstance(exc, FrontierLost) else AttemptCause.INFRASTRUCTURE
            reason = f"Trawl's infrastructure failed ({type(exc).__name__}: {exc})"
            return _result(job_attempt_over(job=job, cause=cause, reason=reason) or job)


def _job_run(*, job: CrawlJob, worker: str, shard: int = 0) -> dict[str, Any]:
    """Everything after the claim, while the attempt's log is captured: route, crawl, then the outcome."""
    if cancel_requested(job_id=job.id):
        return _ended(job, ErrorClass.CANCELLED, "cancelled before it started")
    try:
        version, spider_cls = _routed(job, shard=shard)
    except SpiderImportError as exc:  # the version's code is broken: its author's error, with its traceback
        logger.error("job %s: %s\n%s", job.pk, exc.message, exc.detail)
        return _ended(job, ErrorClass.SPIDER_ERROR, f"{exc.message}\n\n{exc.detail}".rstrip())
    except BuildWaitStopped as exc:
        if exc.cancelled:
            return _ended(job, ErrorClass.CANCELLED, "cancelled while it waited for its version's build")
        reason = "its worker shut down while it waited for its version's build"
        return _result(job_attempt_over(job=job, cause=AttemptCause.WARM_SHUTDOWN, reason=reason) or job)
    except TrawlError as exc:
        return _ended(job, ErrorClass.ROUTING, exc.message)
    # Every crawl keeps its scheduler state in the job's frontier, a packaged one too: its child process runs Trawl's
    # scheduler against the same Redis keys (runtime.packaged.child).
    frontier = Shard(job, index=shard) if settings.TRAWL_FRONTIER_ENABLED else None
    spec = crawl_spec_build(job=job, version=version)
    scrapy_settings = _crawl_settings(job, version, spec=spec, frontier=frontier)
    _log_start(job, version, worker=worker, shard=shard)
    sentry_job_tags(job_id=job.pk, scraper=job.scraper.name, version=version.version)
    ingest = ItemIngest(job, shard=frontier)
    tick = CrawlTick(job, ingest=ingest, shard=frontier)
    run = (
        partial(run_spider, spider_cls=spider_cls, on_session=tick.session_known)
        if spider_cls
        else partial(
            package_run, spec=spec, unused=packages_unused, pool=child_pool(), project=project_layer_for(spec=spec)
        )
    )
    try:
        spider = partial(_spider_of, tick)  # weighed if its process passes its memory bound (project.pools.memory)
        with reactor_watched(job=job, tick=tick, shard=frontier), crawl_weighed(f"{job.pk}:{shard}", spider):
            crawl, session = run(
                settings=scrapy_settings,
                spider_kwargs=spider_kwargs(job, args=spec.args),
                timeout=_time_left(job, version),
                on_tick=tick,
                tick_seconds=TICK_SECONDS,
            )
    except PackageUnavailable as exc:
        return _ended(job, ErrorClass.PACKAGE, exc.message)
    if frontier is not None:
        frontier.check_intact(crawl.stats)  # a crawl of a lost frontier is a part of the site: never its success
    if crawl.stopped_because == "infrastructure" or crawl.stats.get("trawl/infrastructure_errors"):
        raise InfrastructureUnavailable(
            f"the crawl could not reach Trawl's Redis or database ({crawl.stopped_because})"
        )
    ingest.flush(session)
    job_screenshots_store(job=job, taken=screenshots_drain(session.crawler) + session.screenshots)
    job_error_pages_store(job=job, kept=error_pages_drain(session.crawler) + session.error_pages)
    job_recording_store(job=job, recording=recording_drain(session.crawler) or session.recording, shard=shard)
    stats = {**job_stats(crawl.stats), **ingest.item_counts(), **_closed_by(crawl.finish_reason)}
    if frontier is not None:
        if crawl.stopped_because == "shutdown":  # requeued already: another worker continues from the frontier
            if tick.handed_back_as is not None and tick.handed_back_as.status != JobStatus.QUEUED:
                return _result(tick.handed_back_as)  # ended instead (its memory bound, on its last attempt)
            return {"status": JobStatus.QUEUED, "url": job.url, "job_id": str(job.pk), "requeued": True, "shard": shard}
        if _left_for_others(job, crawl):
            return shard_leave(job=job, frontier=frontier, stats=stats)
        if not crawl.stopped_because and (crawl.finish_reason == "finished" or closed_by(crawl.finish_reason)):
            # Its part done, or the job's max_pages / max_items reached, which closes each shard at its next page:
            # the job's numbers include every shard's last pages.
            frontier.others_final(progress=stats)
        stats = {**frontier.total(stats, final=True), "finish_reason": stats.get("finish_reason", "")}
    return _outcome(job, crawl, stats, ingest=ingest, scrapy_settings=scrapy_settings)


def _routed(job: CrawlJob, *, shard: int) -> tuple[Any, Any]:
    """The version to run (recorded on the job by its first shard) and its spider class; None for a packaged
    version, whose spider is imported inside its own environment, never in this process."""
    version = routed_when_built(job, partial(version_for, job=job, shard=shard))
    path = spider_path_of(job=job, version=version)
    spider_cls = None if version.package_id else spider_load(path)
    if spider_cls is not None and job.spider and spider_cls.name != job.spider:
        raise TrawlError(f"{version} has no spider named {job.spider!r} (it has: {spider_cls.name})", field="spider")
    if not shard:
        CrawlJob.objects.filter(pk=job.pk).update(version=version)
    job.version = version
    return version, spider_cls


def _crawl_settings(job: CrawlJob, version: Any, *, spec: CrawlSpec, frontier: Shard | None) -> dict[str, Any]:
    """The crawl's Scrapy settings: the version's, the job's frontier (opened, and the other shards published, so
    they find it), its monitors; the attempt's log level follows them."""
    scrapy_settings = scrapy_settings_for(spec=spec)
    if frontier is not None:
        scrapy_settings.update(frontier.scrapy_settings())
        frontier.publish_others()
    scrapy_settings["TRAWL_MONITORS"] = job_monitors(job=job, version=version)
    job_log_level(level=scrapy_settings.get("LOG_LEVEL") or "INFO")
    return scrapy_settings


def _log_start(job: CrawlJob, version: Any, *, worker: str, shard: int) -> None:
    logger.info(
        "job start id=%s version=%s/%s variant=%s domain=%s priority=%s attempt=%s shard=%s/%s worker=%s",
        job.pk,
        job.scraper.name,
        version.version,
        version.variant,
        urlsplit(job.url).hostname or "-",
        job.priority,
        job.attempt,
        shard,
        job.parallelism,
        worker,
    )


def _outcome(
    job: CrawlJob, crawl: Any, stats: dict[str, Any], *, ingest: ItemIngest, scrapy_settings: dict[str, Any]
) -> dict[str, Any]:
    """The crawl's verdict (error class, then watchdogs and monitors), and the job's end with it."""
    discovered = list(ingest.discovered.values())
    for receiver in hooks.CRAWL_FINISHED:  # sources: links discovered, sources created, Retry-After
        stats.update(receiver(job=job, discovered=discovered, scrapy_stats=crawl.stats))
    verdict = classify(
        stats=stats,
        stopped_because=crawl.stopped_because,
        crawl_error=crawl.crawl_error,
        first_spider_error=crawl.first_spider_error,
        max_spider_errors=int(scrapy_settings["TRAWL_MAX_SPIDER_ERRORS"]),
        max_spider_error_share=float(scrapy_settings["TRAWL_MAX_SPIDER_ERROR_SHARE"]),
        block_share=float(scrapy_settings["TRAWL_BLOCK_SHARE"]),
    )
    verdict = job_outcome_monitored(
        job=job, verdict=verdict, stats=stats, scrapy_stats=crawl.stats, monitors=scrapy_settings["TRAWL_MONITORS"]
    )
    # The end's follow-ups log the `job finish ...` line and send the alerts, for every way a job ends.
    return _ended(job, verdict.error_class, verdict.message, stats=stats, alerts=verdict.alerts)


def _closed_by(finish_reason: str) -> dict[str, str]:
    """`closed_by: max_pages` (or `max_items`) in the stats of a job its budget ended (runtime.watch.budget)."""
    option = closed_by(finish_reason)
    return {"closed_by": option} if option else {}


def _spider_of(tick: CrawlTick) -> Any:
    crawler = tick.session.crawler if tick.session is not None else None
    return getattr(crawler, "spider", None)


def _ended(job: CrawlJob, error_class: str, message: str, **outcome: Any) -> dict[str, Any]:
    return _result(job_end(job=job, error_class=error_class, message=message, **outcome) or job)


def shard_leave(*, job: CrawlJob, frontier: Shard, stats: dict[str, Any]) -> dict[str, Any]:
    """This shard's part is done and another shard still works: record its final numbers and let the last one end
    the job. Its log is written first, since the last shard ends the job once every shard's final numbers are in:
    whoever sees the final status finds every shard's whole log."""
    logger.info("job %s shard %s done; the job ends with its last shard", job.pk, frontier.index)
    job_log_flush()
    frontier.total(stats, final=True)
    return {"status": JobStatus.RUNNING, "url": job.url, "job_id": str(job.pk), "shard": frontier.index}


def version_for(*, job: CrawlJob, shard: int = 0) -> Any:
    """The version to run: routed for the job's first shard; the others run the one it was routed to."""
    if shard and job.version_id:
        return job.version
    return version_route(
        scraper=job.scraper, version=job.requested_version, variant=job.requested_variant, priority=job.priority
    )


def _time_left(job: CrawlJob, version: Any) -> float:
    """The job's timeout counts from its claim: a shard that joins later stops with the others."""
    elapsed = (timezone.now() - job.started_at).total_seconds() if job.started_at else 0.0
    return max(1.0, job_timeout(job, version) - elapsed)


def _left_for_others(job: CrawlJob, crawl: Any) -> bool:
    """This shard finished its part and another shard is still at work: the last one ends the job."""
    if crawl.stopped_because or crawl.crawl_error or crawl.finish_reason != "finished":
        return False
    return (crawl.stats.get("frontier/leave") or ("last" if job.parallelism == 1 else "done")) == "done"


def _result(job: CrawlJob) -> dict[str, Any]:
    """The task's result: status and URL first, because Flower shows its start (the task raises it as CrawlFailed
    for a failed crawl: crawls.worker.failures)."""
    return {
        "status": job.status,
        "url": job.url,
        "error_class": job.error_class,
        "error": (job.error_message or "").strip().split("\n", 1)[0][:300],
        "job_id": str(job.pk),
        "stats": job.stats,
    }
