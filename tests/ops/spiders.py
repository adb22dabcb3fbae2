"""Spiders of the ops end-to-end tests. Importable by worker subprocesses (the repository root is on their path)."""

from __future__ import annotations

from crawls.scraping.spiders.link import LinkSpider


class ChattySpider(LinkSpider):
    """The link spider, saying at INFO which page it parsed: the spider's own line a job log must show."""

    name = "chatty"

    def parse(self, response):
        self.logger.info("chatty parsed %s", response.url)
        yield from super().parse(response)
