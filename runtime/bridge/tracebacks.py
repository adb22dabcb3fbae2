"""A spider's exception as a job reports it: `Type: message` on the first line (what lists and webhooks show), then
the traceback, so a broken spider is debugged from its job alone — as in a terminal running `scrapy crawl`."""

from __future__ import annotations

import traceback
from typing import Any

TRACEBACK_MAX_CHARS = 6000  # the end of a long traceback is where the spider's own frame and the error are


def exception_report(exc: BaseException, *, where: str = "") -> str:
    headline = f"{type(exc).__name__}: {exc}{where}"
    return f"{headline}\n\n{_bounded(''.join(traceback.format_exception(exc)))}"


def failure_report(failure: Any, *, where: str = "") -> str:
    """The same for a Twisted Failure (Scrapy's spider_error signal hands one)."""
    headline = f"{failure.type.__name__}: {failure.getErrorMessage()}{where}"
    if failure.value is not None and failure.value.__traceback__ is not None:
        return f"{headline}\n\n{_bounded(''.join(traceback.format_exception(failure.value)))}"
    return f"{headline}\n\n{_bounded(failure.getTraceback())}"


def _bounded(text: str) -> str:
    text = text.rstrip()
    if len(text) <= TRACEBACK_MAX_CHARS:
        return text
    return "Traceback (most recent call last), first frames cut:\n..." + text[-TRACEBACK_MAX_CHARS:]
