"""Writes of the crawls app. Only services a web process needs are re-exported here: the crawl executor
(crawls.services.execution, which loads crochet and Scrapy) is imported by the worker's tasks alone."""

from crawls.services.cancelling import batch_cancel, job_cancel
from crawls.services.jobs import job_create
from crawls.services.lifecycle import job_claim

__all__ = ("batch_cancel", "job_cancel", "job_claim", "job_create")
