"""Feed URIs' credentials out of job logs (runtime/settings/feeds.py): the rule and the filter on Scrapy's loggers."""

from __future__ import annotations

import logging

import pytest

from runtime.settings.feeds import FEED_LOGGERS, REDACTION, FeedLogRedaction, uri_redacted

URI = "ftp://user:hunter2@ftp.example/x.csv"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("in: s3://AKIAKEY:se/cr+et@bucket/a.csv", "in: s3://***@bucket/a.csv"),
        ("ftp://user:p%40ss@ftp.example:21/x.csv", "ftp://***@ftp.example:21/x.csv"),
        ("gs://token@bucket/x and ftp://u:p@h/y", "gs://***@bucket/x and ftp://***@h/y"),
        ("file:///tmp/items.csv", "file:///tmp/items.csv"),
        ("s3://bucket/a.csv", "s3://bucket/a.csv"),
    ],
)
def test_credentials_in_urls_are_redacted(text, shown):
    assert uri_redacted(text) == shown


def test_the_extension_filters_scrapys_feed_loggers_once(caplog):
    FeedLogRedaction.from_crawler(None)
    FeedLogRedaction.from_crawler(None)
    feed_logger = logging.getLogger("scrapy.extensions.feedexport")

    try:
        raise ConnectionRefusedError(f"cannot reach {URI}")
    except ConnectionRefusedError:
        with caplog.at_level(logging.INFO):
            feed_logger.error(
                "Error storing %s", "csv feed (2 items) in: ftp://user:hunter2@ftp.example/x.csv", exc_info=True
            )

    assert all(logging.getLogger(name).filters.count(REDACTION) == 1 for name in FEED_LOGGERS)
    [record] = [record for record in caplog.records if record.name == feed_logger.name]
    assert record.getMessage() == "Error storing csv feed (2 items) in: ftp://***@ftp.example/x.csv"
    assert "hunter2" not in caplog.text and "ftp://***@ftp.example/x.csv" in record.exc_text
