"""Where apps above crawls (ops, sources) hear of a crawl's and a job's end without crawls importing them.

Crawls calls the hooks; each higher app subscribes its receivers in its AppConfig.ready(), so the import runs
downward only (tests/test_layers.py). A receiver takes the job; crawls.services.after_end runs each one guarded, so
one that fails never undoes the end nor skips the others.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from project.hooks import subscribe_once

if TYPE_CHECKING:
    from crawls.models import CrawlJob

JobReceiver = Callable[["CrawlJob"], None]
# (job=, discovered=[link records], scrapy_stats=) -> stats to add to the job's
CrawlReceiver = Callable[..., dict[str, Any]]

# As a crawl's outcome is judged, before the job's end (a receiver that raises fails the run like any crawl code):
# sources adds what its crawl found for it (links discovered, sources created, the site's Retry-After).
CRAWL_FINISHED: list[CrawlReceiver] = []

# Inside the end's transaction (each in its own savepoint): what must commit with the final state (a source's next
# run booked in the same commit).
JOB_ENDING: list[JobReceiver] = []
# Once the final state is committed: counters, alerts.
JOB_ENDED: list[JobReceiver] = []


def on_crawl_finished(receiver: CrawlReceiver) -> CrawlReceiver:
    return subscribe_once(CRAWL_FINISHED, receiver)


def on_job_ending(receiver: JobReceiver) -> JobReceiver:
    return subscribe_once(JOB_ENDING, receiver)


def on_job_ended(receiver: JobReceiver) -> JobReceiver:
    return subscribe_once(JOB_ENDED, receiver)
