"""Hand-made pages for the spider tests: a list page of the shop, a response for it, and what a callback yields split
into items and requests."""

from __future__ import annotations

from scrapy.http import HtmlResponse, Request

START = "http://shop.test:8080/list-1.html"

LIST_PAGE = """<html><head><title> List 1 </title></head><body>
<div class="card"><h2>Product 1</h2><a class="product" href="/product-1.html">one</a>
  <img src="/img/1.png"><span class="price">11.00</span></div>
<div class="card"><h2>Product 2</h2><a class="product" href="product-2.html">two</a>
  <img src="img/2.png"><span class="price">12.00</span></div>
<div class="card"><h2>Product 3</h2><span class="price">13.00</span></div>
<nav class="categories"><a href="/cat/shoes">Shoes</a><a href="/cat/hats">Hats</a></nav>
<a class="next" href="/list-2.html">next</a>
<a href="http://elsewhere.test/page">elsewhere</a>
<a href="http://cdn.shop.test/promo">promo</a>
<a href="/logo.png">logo</a>
</body></html>"""


def page(url: str = START, body: str = LIST_PAGE, depth: int | None = None) -> HtmlResponse:
    meta = {} if depth is None else {"trawl_depth": depth}
    return HtmlResponse(url=url, body=body.encode(), encoding="utf-8", request=Request(url, meta=meta))


def run(results) -> tuple[list[dict], list[Request]]:
    out = list(results)
    return [r for r in out if isinstance(r, dict)], [r for r in out if isinstance(r, Request)]
