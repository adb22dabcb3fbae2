"""Validators shared by several apps' models, and the priority check their services share."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator

from project.errors import TrawlError
from project.messaging.brokers import PRIORITY_MAX, PRIORITY_MIN

PRIORITY_VALIDATORS = [MinValueValidator(PRIORITY_MIN), MaxValueValidator(PRIORITY_MAX)]
# Shards of one crawl job (crawls.services.shards); TRAWL_MAX_PARALLELISM is the same bound.
PARALLELISM_VALIDATORS = [MinValueValidator(1), MaxValueValidator(32)]


def priority_check(priority: int) -> None:
    """A service's check of a priority it was given: a TrawlError naming `priority` unless within Trawl's bounds."""
    if not PRIORITY_MIN <= int(priority) <= PRIORITY_MAX:
        raise TrawlError(
            f"priority must be between {PRIORITY_MIN} and {PRIORITY_MAX}, got {priority}", field="priority"
        )


def whole_number(value: object, *, field: str, low: int = 1, high: int) -> int:
    """A query parameter's whole number between `low` and `high`, or a TrawlError naming `field`. ASCII digits only:
    `str.isdigit` also takes '²' (which `int` refuses) and `int` takes '٣' (Arabic-Indic three)."""
    text = str(value).strip()
    if not (text.isascii() and text.isdigit()) or not low <= int(text) <= high:
        raise TrawlError(f"{field} must be a whole number from {low} to {high}, got {value!r}", field=field)
    return int(text)
