"""Writes of the crawls app. Only services a web process needs are re-exported here: the crawl executor
(crawls.services.execution, which loads crochet and Scrapy) is imported by the worker's tasks alone."""

from crawls.services.jobs import job_cancel, job_create
from crawls.services.lifecycle import job_claim

__all__ = ("job_cancel", "job_claim", "job_create")
