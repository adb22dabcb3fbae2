"""Storing a recorded crawl (runtime/replay/record.py) with its job: in the database, which every host reaches."""

from __future__ import annotations

import logging

from crawls.models import CrawlJob, JobRecording
from runtime.replay.record import Recording

logger = logging.getLogger("trawl.replay")


def job_recording_store(*, job: CrawlJob, recording: Recording | None, shard: int = 0) -> JobRecording | None:
    """The shard's recording, replacing an earlier attempt's (a new attempt records the crawl again)."""
    if recording is None:
        return None
    stored, _ = JobRecording.objects.update_or_create(
        job=job,
        shard=shard,
        defaults={
            "warc": recording.warc(),
            "responses": recording.responses,
            "items": recording.items,
            "truncated": recording.truncated,
        },
    )
    logger.info(
        "job %s: recorded %d response(s), %d item(s), %d bytes of WARC%s",
        job.pk,
        recording.responses,
        len(recording.items),
        len(stored.warc),
        " (truncated: a bound was reached)" if recording.truncated else "",
    )
    return stored
