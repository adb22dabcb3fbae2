"""A failed crawl is a Celery FAILURE carrying its error class; a batch chord's error turn for it is one log line."""

from __future__ import annotations

import logging

import pytest
from celery.exceptions import ChordError

from crawls.worker.failures import ChordCrawlFailureQuieted, CrawlFailed, crawl_failure_raise

FAILED = {"status": "failed", "url": "http://shop.test/", "error_class": "http_5xx", "job_id": "j1"}


def test_a_failed_crawl_raises_with_its_error_class_first():
    with pytest.raises(CrawlFailed) as raised:
        crawl_failure_raise({**FAILED, "error": "server errors: 503 ×3\nmore lines"})

    assert str(raised.value) == "http_5xx: server errors: 503 ×3 (job j1, http://shop.test/)"
    assert raised.value.args == (str(raised.value),)  # one string: the result backend's JSON carries it whole


@pytest.mark.parametrize(
    "result",
    [
        {**FAILED, "status": "succeeded", "error_class": ""},
        {**FAILED, "status": "cancelled", "error_class": "cancelled"},
        {**FAILED, "status": "queued", "requeued": True},
        {**FAILED, "claimed": False},  # a duplicate message of a job that had already failed
    ],
)
def test_anything_but_a_failure_this_message_ran_is_a_success(result):
    assert crawl_failure_raise(result) is None


def chord_record(cause: Exception) -> logging.LogRecord:
    try:
        raise ChordError(f"Dependency x raised {cause!r}") from cause
    except ChordError as exc:
        record = logging.LogRecord("celery.backends.redis", logging.ERROR, __file__, 1, "Chord %r raised: %r", (), None)
        record.args, record.exc_info = ("g1", exc), (type(exc), exc, exc.__traceback__)
        return record


def test_a_chord_ended_by_a_crawl_failure_is_logged_in_one_info_line():
    record = chord_record(CrawlFailed("http_5xx: boom"))

    assert ChordCrawlFailureQuieted().filter(record)
    assert (record.levelname, record.exc_info) == ("INFO", None)
    assert "a crawl failed" in record.getMessage() and "http_5xx: boom" in record.getMessage()


def test_other_chord_errors_stay_errors_with_their_traceback():
    record = chord_record(RuntimeError("backend broke"))

    assert ChordCrawlFailureQuieted().filter(record)
    assert record.levelname == "ERROR" and record.exc_info is not None
