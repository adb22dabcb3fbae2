"""A job log's Redis side, as the worker running an attempt writes it: its records as lines, and its keys.

Each record is one line (`2026-11-23T09:00:00.123Z INFO scrapy.core.engine Spider opened`; a multi-line record's
further lines continue it). The sink keeps the first half of TRAWL_JOB_LOG_MAX_LINES records and the last half and
counts them all; the keys expire after TRAWL_JOB_LOG_TTL_SECONDS. crawls.logs.joblog reads them and stores a finished
attempt's log in the database.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from project.redis import get_redis, hash_tag, redis_key
from runtime.bridge.tracebacks import traceback_shaped

CONTINUATION = "| "  # after the time, level and logger of a multi-line record's second and later lines
MAX_RECORD_LINES = 500  # with TRAWL_JOB_LOG_LINE_CHARS, bounds what one record's line prefixes can add


def record_line(record: logging.LogRecord, *, max_chars: int) -> str:
    """`2026-11-23T09:00:00.123Z INFO scrapy.core.engine Spider opened`: one record. A multi-line record (a traceback,
    Scrapy's stats dump) keeps its lines, each continuation line prefixed with the record's time, level and logger
    then `| `, so that every line still starts with a time and a level and the record can be told apart again."""
    at = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    message = record.getMessage()
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    # A traceback keeps its end (the exception, the spider's own line): it is shaped, and the message before it cut.
    shaped = traceback_shaped(record.exc_text, max_chars=max_chars * 2 // 3) if record.exc_text else ""
    room = max_chars - len(shaped) - 1 if shaped else max_chars
    if len(message) > room:
        message = message[: max(0, room - 1)] + "…"
    if shaped:
        message = f"{message}\n{shaped}"
    # A spider names its own loggers: a space in a name would shift the fields every reader splits on.
    head = f"{at} {_word(record.levelname)} {_word(record.name)}"
    # Every line boundary a reader may split on (\r, \v, \u2028...), not just \n, starts a continuation line: a
    # message can never forge a record of its own.
    first, *rest = message.splitlines() or [""]
    if len(rest) > MAX_RECORD_LINES:
        rest = [*rest[:MAX_RECORD_LINES], f"… {len(rest) - MAX_RECORD_LINES} more lines"]
    return "\n".join([f"{head} {first}", *(f"{head} {CONTINUATION}{line}" for line in rest)])


def _word(name: str) -> str:
    return "_".join(str(name).split()) or "-"


def job_log_keys(job_id: object, attempt: int, shard: int) -> tuple[str, str, str]:
    base = ("joblog", hash_tag(job_id), attempt, shard)
    return redis_key(*base, "head"), redis_key(*base, "tail"), redis_key(*base, "count")


def job_log_shards_key(job_id: object, attempt: int) -> str:
    return redis_key("joblog", hash_tag(job_id), attempt, "shards")


@dataclass(frozen=True)
class JobLogLimits:
    """How much of an attempt's log is kept and for how long (the project's TRAWL_JOB_LOG_* settings)."""

    max_lines: int  # records kept: the first half and the last half
    line_chars: int  # characters of one record
    flush_seconds: float  # how often captured records go to Redis
    ttl_seconds: int  # how long records left by a worker that died stay readable


class JobLogSink:
    """The Redis side of one attempt's log. Only its worker writes it, so it counts what it wrote itself."""

    def __init__(self, *, job_id: object, attempt: int, shard: int = 0, limits: JobLogLimits) -> None:
        self.job_id, self.attempt, self.shard = job_id, attempt, shard
        self.limits = limits
        self.head_cap = limits.max_lines // 2
        self.tail_cap = limits.max_lines - self.head_cap
        self.written = 0

    def write(self, lines: list[str]) -> None:
        if not lines:
            return
        head_key, tail_key, count_key = job_log_keys(self.job_id, self.attempt, self.shard)
        head = lines[: max(0, self.head_cap - self.written)]
        rest = lines[len(head) :]
        ttl = self.limits.ttl_seconds
        pipe = get_redis().pipeline(transaction=True)
        if head:
            pipe.rpush(head_key, *head)
        if rest:
            pipe.rpush(tail_key, *rest[-self.tail_cap :])
            pipe.ltrim(tail_key, -self.tail_cap, -1)
        pipe.incrby(count_key, len(lines))
        pipe.sadd(job_log_shards_key(self.job_id, self.attempt), self.shard)
        for key in (head_key, tail_key, count_key, job_log_shards_key(self.job_id, self.attempt)):
            pipe.expire(key, ttl)
        pipe.execute()
        self.written += len(lines)
