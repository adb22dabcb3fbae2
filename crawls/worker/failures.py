"""A failed crawl as Celery sees it: the `run_crawl` task raises `CrawlFailed`, so the result backend and Flower show
FAILURE (Flower's Failed tile counts it) with the job's error class leading the exception's message.

Raising is safe for a batch's chord: the chord still counts the task (the result backend collects every header
result, failures too), and once the last one is in, a failed header makes Celery call the body's error callback instead
of the body — both are `finalize_batch`, which ends the batch exactly once (crawls.services.batch_runs). The job row is
the truth either way; the task's state only says how the crawl went. Celery logs that turn as an error with a
traceback ("Chord ... raised: ChordError"); for a crawl's failure it is the expected path, logged in one line.
"""

from __future__ import annotations

import logging
from typing import Any

from crawls.states import JobStatus

FAILED_STATUSES = (JobStatus.FAILED, JobStatus.DEAD)


class CrawlFailed(Exception):
    """A crawl that ended failed: `http_5xx: <the job's error> (job <id>, <url>)`. One string argument, so the
    result backend's JSON carries it and Flower shows it as `CrawlFailed('http_5xx: ...')`."""


def crawl_failure_raise(result: dict[str, Any]) -> None:
    """Raise CrawlFailed when the result is a job this message ran and that ended failed. A message that claimed
    nothing (a duplicate, a job already ended) or a job requeued or cancelled stays a success."""
    if result.get("claimed") is False or result.get("status") not in FAILED_STATUSES:
        return
    error = str(result.get("error") or "").strip().splitlines()
    summary = f"{result.get('error_class') or result['status']}: {error[0] if error else result['status']}"
    raise CrawlFailed(f"{summary[:500]} (job {result.get('job_id')}, {result.get('url')})")


# Where Celery's result backends log a chord whose header failed.
CHORD_LOGGERS = ("celery.backends.redis", "celery.backends.base")


class ChordCrawlFailureQuieted(logging.Filter):
    """Turns "Chord ... raised: ChordError(... CrawlFailed ...)" from an ERROR with a traceback into one INFO line:
    a batch with a failed crawl ends through the chord's error callback, as designed. Other chord errors stay."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if record.msg == "Chord %r raised: %r" and isinstance(getattr(exc, "__cause__", None), CrawlFailed):
            record.msg = "chord %r: a crawl failed (%r); its error callback finalizes the batch"
            record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
            record.exc_info = record.exc_text = None
        return True


def chord_failure_logs_quieted(**_kwargs) -> None:
    for name in CHORD_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(existing, ChordCrawlFailureQuieted) for existing in logger.filters):
            logger.addFilter(ChordCrawlFailureQuieted())
