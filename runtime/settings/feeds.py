"""Scrapy feed exports (a scraper's or version's FEEDS): URI templates may name the job, scraper and version.

`s3://bucket/%(scraper)s/%(version)s/%(job_id)s-%(time)s.jsonl` — `time` and `batch_time` are Scrapy's own, as is
every spider attribute (`%(name)s`). Only admins set FEEDS (on scrapers and versions); job options never reach it.

A feed URI may carry the storage's credentials (`s3://KEY:SECRET@bucket/...`, `ftp://user:pass@host/...`), and Scrapy
logs the URI of every feed it stores ("Stored csv feed (12 items) in: ..."), or fails to, into the job's log, which
the job's requester reads. `FeedLogRedaction`, an extension of every crawl, puts `CredentialsRedacted` on the loggers
that print feed URIs: the user information of every URL in their records becomes `***`.
"""

from __future__ import annotations

import logging
import re
from typing import Any

PARAMS_SETTING = "TRAWL_FEED_PARAMS"
# Scrapy's loggers that print feed URIs: the feed exporter's own, and the one that logs an exception a feed slot's
# opening raised (a signal handler's).
FEED_LOGGERS = ("scrapy.extensions.feedexport", "scrapy.utils.signal")
# `scheme://user:password@` (or `scheme://token@`): from `//` to the `@` (a secret may hold `/`, as AWS keys do).
USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^\s@'\"<>]*@")
REDACTED = r"\g<scheme>***@"


def feed_uri_params(params: dict[str, Any], spider: Any) -> dict[str, Any]:
    """FEED_URI_PARAMS: Scrapy's params plus `job_id`, `attempt`, `scraper`, `version` of the running job."""
    return {**params, **spider.crawler.settings.getdict(PARAMS_SETTING)}


def uri_redacted(text: str) -> str:
    """`text` with the credentials of every URL in it replaced by `***`."""
    return USERINFO.sub(REDACTED, text) if "@" in text else text


class CredentialsRedacted(logging.Filter):
    """Rewrites a record's message and traceback with the credentials of the URLs they show redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = uri_redacted(message)
        if redacted != message:
            record.msg, record.args = redacted, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = uri_redacted(record.exc_text)
        return True


REDACTION = CredentialsRedacted()


class FeedLogRedaction:
    """Installs REDACTION on FEED_LOGGERS (once per process; every crawl's extension makes sure of it)."""

    def __init__(self) -> None:
        for name in FEED_LOGGERS:
            feed_logger = logging.getLogger(name)
            if REDACTION not in feed_logger.filters:
                feed_logger.addFilter(REDACTION)

    @classmethod
    def from_crawler(cls, crawler: Any) -> FeedLogRedaction:
        return cls()
