"""Spider code that holds its reactor: it runs the issue's polynomial XPath itself on its start page (a spider's own
code passes no submission check). Importable by worker subprocesses: the repository root is on their path."""

from __future__ import annotations

import scrapy

POLYNOMIAL_XPATH = "//*[count(.//*[count(.//*)>1])>1]"  # nodes x depth²: runtime/inputs/xpath_cost.py
FIELDS = 50  # as many fields as a selectors config may have, each the same walk


class PolynomialXPathSpider(scrapy.Spider):
    name = "polynomial_xpath"

    def parse(self, response):
        values = {f"f{number}": len(response.xpath(POLYNOMIAL_XPATH)) for number in range(FIELDS)}
        yield {"url": response.url, **values}
