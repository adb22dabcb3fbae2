"""What every spider Trawl runs receives: `url` (the job's start URL), `options` and `config` (dicts)."""

from __future__ import annotations

from typing import Any

import scrapy


class TrawlSpider(scrapy.Spider):
    """Optional base class: validates the start URL and gives typed access to `options` and `config`."""

    url: str = ""
    options: dict[str, Any]
    config: dict[str, Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.options = dict(getattr(self, "options", None) or {})
        self.config = dict(getattr(self, "config", None) or {})
        if not self.url and not self.start_urls:
            raise ValueError(f"{type(self).__name__} needs a start `url`")
        if not self.start_urls:
            self.start_urls = [self.url]
