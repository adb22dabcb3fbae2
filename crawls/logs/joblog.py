"""Per-job logs: written to Redis while an attempt runs (runtime.bridge.joblog), stored in the database when it ends,
read by any process.

One writer per (job, attempt, shard): the worker process running it. It keeps the first half of
TRAWL_JOB_LOG_MAX_LINES records and the last half, and a marker line says how many were dropped in between. Records
left in Redis by a worker that died expire after TRAWL_JOB_LOG_TTL_SECONDS; until then they are read from there.
"""

from __future__ import annotations

import contextlib
import heapq
from collections.abc import Iterator

from django.conf import settings

from crawls.models import CrawlJob, JobLog
from project.errors import TrawlError
from project.redis import get_redis
from project.validators import whole_number
from runtime.bridge.joblog import CONTINUATION, JobLogLimits, JobLogSink, job_log_keys, job_log_shards_key
from runtime.bridge.logcapture import JobLogCapture, records_captured

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
MARKER_LOGGER = "trawl.joblog"
# `?tail=` past any log's length is the whole log; `?attempt=` fits the attempt column (a PositiveSmallIntegerField).
QUERY_BOUNDS = {"tail": 10_000_000, "attempt": 32_767}
LOG_QUERY_MAX_CHARS = 200  # `?q=`: a search, not a document


def job_log_sink(*, job_id: object, attempt: int, shard: int = 0) -> JobLogSink:
    """Where one attempt's (and shard's) log records go while it runs, kept to the project's limits."""
    limits = JobLogLimits(
        max_lines=settings.TRAWL_JOB_LOG_MAX_LINES,
        line_chars=settings.TRAWL_JOB_LOG_LINE_CHARS,
        flush_seconds=settings.TRAWL_JOB_LOG_FLUSH_SECONDS,
        ttl_seconds=settings.TRAWL_JOB_LOG_TTL_SECONDS,
    )
    return JobLogSink(job_id=job_id, attempt=attempt, shard=shard, limits=limits)


@contextlib.contextmanager
def job_log_capture(*, job_id: object, attempt: int, shard: int = 0, level: str = "INFO") -> Iterator[JobLogCapture]:
    """The process's log records, for the duration, into the attempt's log; stored in the database at the end."""
    sink = job_log_sink(job_id=job_id, attempt=attempt, shard=shard)
    with records_captured(sink=sink, store=job_log_store, level=level) as capture:
        yield capture


def records_of(lines: list[str]) -> list[str]:
    """Lines (a stored log's text split on newlines) back into records: a line with the previous record's time, level
    and logger followed by `| ` continues it. Logs stored before records kept their lines read one record a line."""
    records: list[str] = []
    for line in lines:
        if records and _continues(records[-1], line):
            records[-1] += "\n" + line
        else:
            records.append(line)
    return records


def _continues(record: str, line: str) -> bool:
    fields = line.split(" ", 3)
    return len(fields) == 4 and fields[3].startswith(CONTINUATION) and record.startswith(" ".join(fields[:3]) + " ")


def _redis_lines(job_id: object, attempt: int, shard: int) -> tuple[list[str], int, int]:
    """(lines with the marker, records logged, records dropped) of a log still in Redis."""
    head_key, tail_key, count_key = job_log_keys(job_id, attempt, shard)
    pipe = get_redis().pipeline(transaction=True)
    pipe.lrange(head_key, 0, -1).lrange(tail_key, 0, -1).get(count_key)
    head, tail, count = pipe.execute()
    count = int(count or 0)
    dropped = max(0, count - len(head) - len(tail))
    return [*head, *_marker(dropped, tail), *tail], count, dropped


def _marker(dropped: int, tail: list[str]) -> list[str]:
    if not dropped:
        return []
    at = tail[0].split(" ", 1)[0] if tail else ""
    cap = settings.TRAWL_JOB_LOG_MAX_LINES
    return [f"{at} WARNING {MARKER_LOGGER} {dropped} records dropped here (a job log keeps its first and last {cap})"]


def job_log_store(*, job_id: object, attempt: int, shard: int = 0) -> JobLog | None:
    """Move an attempt's log from Redis to the database. Written first, deleted after, so readers never miss it."""
    lines, count, dropped = _redis_lines(job_id, attempt, shard)
    if not count:
        return None
    log, _ = JobLog.objects.update_or_create(
        job_id=job_id,
        attempt=attempt,
        shard=shard,
        defaults={"text": "\n".join(lines), "records": count, "dropped": dropped},
    )
    get_redis().delete(*job_log_keys(job_id, attempt, shard))
    return log


def job_log_forget(*, jobs: list[tuple[object, int]]) -> None:
    """Drop what the attempts of these (job id, last attempt) left in Redis (retention deletes the jobs themselves)."""
    attempts = [(job_id, attempt) for job_id, last in jobs for attempt in range(1, last + 1)]
    if not attempts:
        return
    client = get_redis()
    pipe = client.pipeline(transaction=False)
    for job_id, attempt in attempts:
        pipe.smembers(job_log_shards_key(job_id, attempt))
    keys = []
    for (job_id, attempt), shards in zip(attempts, pipe.execute(), strict=True):
        keys.append(job_log_shards_key(job_id, attempt))
        for shard in {0, *map(int, shards)}:
            keys.extend(job_log_keys(job_id, attempt, shard))
    client.delete(*keys)


def job_log_lines(
    *, job: CrawlJob, attempt: int | None = None, level: str = "", tail: int | None = None, q: str = ""
) -> list[str]:
    """The records of one attempt (the job's current one by default), every shard merged by time. A multi-line record
    is one item (its lines joined by newlines): `tail`, `level` and `q` (the records containing that text, case
    aside, on any of their lines) count and filter records, not lines; `tail` counts what the filters kept."""
    attempt = attempt or job.attempt
    # Redis before the database: a log moved in between is then found in the database, never in neither.
    shards = {int(shard) for shard in get_redis().smembers(job_log_shards_key(job.pk, attempt))}
    live = {shard: _redis_lines(job.pk, attempt, shard)[0] for shard in shards}
    stored = {
        log.shard: records_of(log.text.split("\n"))
        for log in JobLog.objects.filter(job=job, attempt=attempt)
        if log.text
    }
    per_shard = [lines for shard, lines in sorted({**live, **stored}.items()) if lines]
    lines = per_shard[0] if len(per_shard) == 1 else list(heapq.merge(*per_shard))
    if level:
        lines = [line for line in lines if _level_of(line) >= LEVELS.index(level)]
    if q:
        wanted = q.casefold()
        lines = [line for line in lines if wanted in line.casefold()]
    return lines[-tail:] if tail else lines


def job_log_new_lines(*, job: CrawlJob, after: str) -> list[str]:
    """The records logged since `after` (the last one a follower printed; "" for all), for `crawl --wait --log`."""
    lines = job_log_lines(job=job)
    if after in lines:
        return lines[len(lines) - lines[::-1].index(after) :]
    return lines


def _level_of(line: str) -> int:
    parts = line.split(" ", 2)
    return LEVELS.index(parts[1]) if len(parts) > 1 and parts[1] in LEVELS else len(LEVELS)


def log_query(params: dict) -> dict:
    """`tail`, `level`, `attempt` and `q` from a query string, or TrawlError naming the bad one."""
    query: dict = {}
    for name in ("tail", "attempt"):
        value = params.get(name)
        if value in (None, ""):
            continue
        query[name] = whole_number(value, field=name, high=QUERY_BOUNDS[name])
    level = str(params.get("level") or "").upper()
    if level and level not in LEVELS:
        raise TrawlError(f"level must be one of {', '.join(LEVELS[:4])}, got {params.get('level')!r}", field="level")
    query["level"] = level
    q = str(params.get("q") or "")
    if len(q) > LOG_QUERY_MAX_CHARS:
        raise TrawlError(f"q must be at most {LOG_QUERY_MAX_CHARS} characters, got {len(q)}", field="q")
    query["q"] = q
    return query
