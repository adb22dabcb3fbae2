"""Crawls' messages: crawls, shards, batch launches and chords, batch finalization (sent through
project.messaging.messages).

Tasks are sent by name, so services never import task modules (which import the crawl executor, crochet and
Scrapy): a web process that creates a job publishes it without loading any of that. Every crawl message carries its
priority (on Redis a message without one counts as the most urgent), Celery time limits that follow the job's own
timeout, and the job's URL, so `celery inspect active` and Flower say what each crawl is.
"""

from __future__ import annotations

import logging

from celery import chord, current_app, signature
from celery.canvas import Signature
from celery.result import AsyncResult, denied_join_result

from crawls.models import Batch, CrawlJob
from crawls.timeouts import celery_time_limits, job_timeout
from project.messaging import messages
from project.messaging.messages import BROKER_AWAY, broker_priority

logger = logging.getLogger("trawl.publish")
PUBLISH_BATCH_SIZE = 1000  # broker commands per pipeline when publishing many (a message and its task-sent event: 2)

RUN_CRAWL = "crawls.tasks.run_crawl"
LAUNCH_BATCH = "crawls.tasks.launch_batch"
FINALIZE_BATCH = "crawls.tasks.finalize_batch"
REPLAY_JOB = "crawls.tasks.replay_job"


def crawl_signature(*, job: CrawlJob, timeout: float | None = None, **extra_kwargs: object) -> Signature:
    """`run_crawl(job id, attempt, url=...)` at the job's priority, with time limits from its timeout."""
    soft, hard = celery_time_limits(job_timeout(job) if timeout is None else timeout)
    kwargs = {"url": job.url, **extra_kwargs}
    return signature(
        RUN_CRAWL,
        args=[str(job.pk), job.attempt],
        kwargs=kwargs,
        immutable=True,
        priority=broker_priority(job.priority),
        soft_time_limit=soft,
        time_limit=hard,
        argsrepr=repr([str(job.pk), job.attempt]),  # Flower shows it: as a list, like the task's own call
    )


def publish_crawl(*, job: CrawlJob, **extra_kwargs: object) -> None:
    """Send the job's current attempt to the crawl queue. Safe to repeat: the worker's claim dedupes."""
    messages.send(crawl_signature(job=job, **extra_kwargs))


def publish_crawls(*, jobs: list[CrawlJob]) -> None:
    """Publish many new jobs (a dispatch pass, a submission) through one producer, its messages sent in batches
    (kombu's publish batch: on Redis one pipeline per PUBLISH_BATCH_SIZE commands instead of a round trip each; other
    transports publish as usual), and ask each scraper's timeout once (two queries each), not once per job.

    Never raises: a job not sent stays queued in the database, where the reaper publishes it again
    (crawls.services.reaper); once the broker is found away the rest are left to it too, rather than each waiting
    out its own connection retries."""
    timeouts: dict[int, float] = {}
    try:
        # denied_join_result: nobody waits on these results (the worker stores them for Flower and chords). Outside a
        # worker, Celery's Redis result backend would otherwise subscribe to each message's result channel as it is
        # sent and unsubscribe as its AsyncResult is dropped: two round trips a message (a worker skips them already).
        with (
            denied_join_result(),
            current_app.producer_or_acquire() as producer,
            producer.batch(max_size=PUBLISH_BATCH_SIZE),
        ):
            declare: dict[str, list] = {}  # the first message declares the crawl queue; the others skip kombu's check
            for job in jobs:
                try:
                    key = job.version_id or -job.scraper_id
                    if key not in timeouts:
                        timeouts[key] = job_timeout(job)
                    messages.send(crawl_signature(job=job, timeout=timeouts[key]), producer=producer, **declare)
                    declare = {"declare": []}
                except BROKER_AWAY:
                    raise
                except Exception:  # this job's own fault (say its version's settings): the others still go
                    logger.exception("job %s not published; the reaper will", job.pk)
    except BROKER_AWAY:
        logger.exception("broker away: some of %s job(s) not published; the reaper will", len(jobs))


def publish_shards(*, job: CrawlJob, shards: range) -> None:
    """The other shards of a parallel job's current attempt (shard 0 claimed it and publishes them)."""
    for shard in shards:
        messages.send(crawl_signature(job=job, shard=shard))


def publish_batch_launch(*, batch: Batch) -> None:
    messages.send(signature(LAUNCH_BATCH, args=(str(batch.pk),), priority=broker_priority(batch.priority)))


def publish_batch_chord(*, batch: Batch, jobs: list[CrawlJob]) -> AsyncResult:
    """One `run_crawl` per job, then `finalize_batch`, which is also the chord's error callback (run if a header
    task raises, so the batch still ends)."""
    body = signature(FINALIZE_BATCH, args=(str(batch.pk),), immutable=True)
    body.on_error(signature(FINALIZE_BATCH, args=(str(batch.pk),), immutable=True))
    timeouts: dict[int, float] = {}  # per scraper: a batch of thousands of jobs asks once per scraper, not per job
    header = []
    for job in jobs:
        key = job.version_id or -job.scraper_id
        if key not in timeouts:
            timeouts[key] = job_timeout(job)
        header.append(crawl_signature(job=job, timeout=timeouts[key]))
    return messages.send(chord(header, body))


def publish_batch_finalize(*, batch_id: object) -> None:
    messages.send(signature(FINALIZE_BATCH, args=(str(batch_id),)))


def publish_replay(*, replay_id: int) -> None:
    messages.send(signature(REPLAY_JOB, args=(replay_id,)))
