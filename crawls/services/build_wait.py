"""A job routed while the version it would run is still building waits for that build instead of failing.

scrapyd's clients deploy and schedule in one breath (`scrapyd-deploy && curl schedule.json`): scrapyd answers
addversion.json once the egg is stored, so the next schedule runs it. Trawl's build (an environment, the spider
imported in it) happens on a crawl worker after addversion.json answered: a job claimed meanwhile would fail
`routing` a second or a minute before the version was ready. Here the claimed job waits (its slot held, its heartbeat
kept, its cancel and the worker's shutdown heeded) until the build ends — ready or failed, which routing then says —
or the build's own time limit or the job's timeout passes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.utils import timezone

from crawls.live.cancel import cancel_requested
from crawls.models import CrawlJob
from crawls.timeouts import job_timeout
from crawls.worker.shutdown import shutdown_requested
from project.errors import TrawlError
from registry.publish import package_build_limit
from registry.services import VersionBuilding

logger = logging.getLogger("trawl.jobs")
BUILD_POLL_SECONDS = 0.5  # routing reads the registry's change counter, one Redis GET, before trusting its cache
Routed = TypeVar("Routed")


class BuildWaitStopped(Exception):
    """The job stopped waiting: cancelled (`cancelled`) or its worker shutting down."""

    def __init__(self, *, cancelled: bool) -> None:
        super().__init__("cancelled" if cancelled else "shutdown")
        self.cancelled = cancelled


def routed_when_built(job: CrawlJob, route: Callable[[], Routed], *, poll: float = BUILD_POLL_SECONDS) -> Routed:
    """`route()`, asked again every `poll` seconds while it raises VersionBuilding. Past the wait's limit the last
    refusal is raised as the TrawlError it is (the job fails `routing`, saying how long it waited)."""
    try:
        return route()
    except VersionBuilding as exc:
        refusal = exc
    started = time.monotonic()
    limit = build_wait_limit(job)
    logger.info("job %s waits up to %.0f s for its version's build: %s", job.pk, limit, refusal.message)
    while time.monotonic() - started < limit:
        time.sleep(poll)
        if cancel_requested(job_id=job.pk):
            raise BuildWaitStopped(cancelled=True)
        if shutdown_requested():
            raise BuildWaitStopped(cancelled=False)
        try:
            routed = route()
        except VersionBuilding as exc:
            refusal = exc
            continue
        logger.info("job %s: its version is built after %.1f s of waiting", job.pk, time.monotonic() - started)
        return routed
    waited = time.monotonic() - started
    raise TrawlError(f"{refusal.message} (waited {waited:.0f} s for the build)", field=refusal.field)


def build_wait_limit(job: CrawlJob) -> float:
    """As long as a build may take (its task's soft time limit), within what is left of the job's timeout (which
    counts from the claim)."""
    elapsed = (timezone.now() - job.started_at).total_seconds() if job.started_at else 0.0
    return max(0.0, min(package_build_limit(), job_timeout(job) - elapsed))
