"""Scrapy feed exports (a scraper's or version's FEEDS): URI templates may name the job, scraper and version.

`s3://bucket/%(scraper)s/%(version)s/%(job_id)s-%(time)s.jsonl` — `time` and `batch_time` are Scrapy's own, as is
every spider attribute (`%(name)s`). Only admins set FEEDS (on scrapers and versions); job options never reach it.
"""

from __future__ import annotations

from typing import Any

PARAMS_SETTING = "TRAWL_FEED_PARAMS"


def feed_uri_params(params: dict[str, Any], spider: Any) -> dict[str, Any]:
    """FEED_URI_PARAMS: Scrapy's params plus `job_id`, `attempt`, `scraper`, `version` of the running job."""
    return {**params, **spider.crawler.settings.getdict(PARAMS_SETTING)}
