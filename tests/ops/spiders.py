"""Spiders of the ops end-to-end tests. Importable by worker subprocesses (the repository root is on their path)."""

from __future__ import annotations

import time

from scrapy import signals

from runtime.spiders.link import LinkSpider


class ChattySpider(LinkSpider):
    """The link spider, saying at INFO which page it parsed: the spider's own line a job log must show."""

    name = "chatty"

    def parse(self, response):
        self.logger.info("chatty parsed %s", response.url)
        yield from super().parse(response)


class SlowToOpen:
    """An extension whose spider_opened handler blocks the reactor for TRAWL_SLOW_OPEN_SECONDS, as an S3 feed's boto3
    client does on a busy machine: time before the first request that is not the site's."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    @classmethod
    def from_crawler(cls, crawler):
        extension = cls(crawler.settings.getfloat("TRAWL_SLOW_OPEN_SECONDS"))
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        return extension

    def spider_opened(self, spider):
        time.sleep(self.seconds)
