"""The `article` scraper: a page's main text as Markdown with its sections, against hand-made pages."""

from __future__ import annotations

import asyncio

from runtime.extraction.markdown import LEAD, MAX_SECTIONS, article_from_html, markdown_sections, sections_within
from runtime.spiders.article import ArticleSpider
from tests.crawler import trawl_crawler
from tests.fixtures.pages import FOOTER_TEXT, NAV_TEXT, SIDEBAR_TEXT, article_page
from tests.runtime.spider_pages import page

URL = "http://news.test/tides.html"


def crawl_page(body: str, **settings) -> tuple[list[dict], list, ArticleSpider]:
    crawler = trawl_crawler(ArticleSpider, settings)
    spider = ArticleSpider.from_crawler(crawler, url=URL, start_urls=[URL], options={"maxdepth": 1})
    crawler.spider = spider

    async def collect():
        return [result async for result in spider.parse(page(URL, body))]

    results = asyncio.run(collect())
    return [r for r in results if isinstance(r, dict)], [r for r in results if not isinstance(r, dict)], spider


def test_the_main_text_is_markdown_with_headings_lists_links_and_tables_and_no_boilerplate():
    article = article_from_html(article_page(), url=URL, markdown_max=100_000)

    markdown = article["markdown"]
    assert markdown.startswith("# Tides of the North Sea\n")
    assert "\n## Amphidromic points\n" in markdown and "\n### Storm surges\n" in markdown
    assert "- One off the Danish coast" in markdown
    assert "[the tide tables](https://tides.example/tables)" in markdown
    assert "| Hull | 6.4 |" in markdown
    for boilerplate in (*NAV_TEXT, SIDEBAR_TEXT, FOOTER_TEXT):
        assert boilerplate not in markdown
    assert (article["title"], article["published"]) == ("Tides of the North Sea", "2026-03-14")


def test_sections_are_keyed_by_heading_and_hold_their_own_markdown():
    article = article_from_html(article_page(), url=URL, markdown_max=100_000)

    sections = article["sections"]
    assert list(sections) == ["Tides of the North Sea", "Amphidromic points", "Tidal range", "Storm surges"]
    assert sections["Tidal range"].startswith("## Tidal range\n")
    assert "Storm surges" not in sections["Tidal range"]
    assert "\n\n".join(sections.values()) == article["markdown"]


def test_a_changed_paragraph_changes_only_its_section():
    before = article_from_html(article_page(), url=URL, markdown_max=100_000)["sections"]
    after = article_from_html(article_page(range_text="seven metres at Boston"), url=URL, markdown_max=100_000)

    changed = {key for key in before.keys() | after["sections"].keys() if before.get(key) != after["sections"].get(key)}
    assert changed == {"Tidal range"}


def test_text_before_any_heading_repeated_headings_and_fenced_code():
    markdown = (
        "Intro line.\n\n## Notes\nfirst\n\n## *Notes*\nsecond\n\n```\n# not a heading\n```\n## [Linked](http://x)"
    )

    sections = markdown_sections(markdown)

    assert list(sections) == [LEAD, "Notes", "Notes (2)", "Linked"]
    assert "# not a heading" in sections["Notes (2)"]


def test_a_heading_named_like_a_counted_one_and_the_bound_on_sections():
    assert list(markdown_sections("## A\nx\n## A\ny\n## A (2)\nz")) == ["A", "A (2)", "A (2) (2)"]
    many = markdown_sections("".join(f"## Same\ntext {n}\n" for n in range(MAX_SECTIONS + 50)))
    assert len(many) == MAX_SECTIONS and list(many)[-1] == f"Same ({MAX_SECTIONS})"
    assert many[f"Same ({MAX_SECTIONS})"].endswith(f"text {MAX_SECTIONS + 49}")


def test_markdown_over_its_bound_keeps_whole_leading_sections():
    sections = {"A": "# A\n" + "a" * 50, "B": "## B\n" + "b" * 50, "C": "## C\n" + "c" * 50}

    kept, truncated = sections_within(sections, 120)
    assert (list(kept), truncated) == (["A", "B"], True)
    kept, truncated = sections_within({"A": "# A\n" + "line\n" * 40}, 30)
    assert truncated and len(kept["A"].encode()) <= 30 and kept["A"].endswith("line")


def test_the_spider_yields_the_article_and_follows_links_like_link():
    items, requests, spider = crawl_page(article_page())

    assert len(items) == 1
    item = items[0]
    assert set(item) == {"url", "title", "published", "lang", "markdown", "sections"}
    assert (item["url"], item["lang"], item["title"]) == (URL, "en-GB", "Tides of the North Sea")
    assert "http://news.test/desk-0.html" in [request.url for request in requests]
    assert spider.crawler.stats.get_value("article/pages") == 1


def test_a_page_above_the_html_bound_is_not_extracted_and_counted():
    items, _, spider = crawl_page(article_page(), TRAWL_ARTICLE_HTML_MAX_BYTES=1000)

    assert items == []
    assert spider.crawler.stats.get_value("article/too_large") == 1


def test_markdown_above_its_bound_is_cut_at_a_section_and_flagged():
    items, _, spider = crawl_page(article_page(), TRAWL_ARTICLE_MARKDOWN_MAX_BYTES=400)

    assert items[0]["_truncated"] is True
    assert len(items[0]["markdown"].encode()) <= 400
    assert list(items[0]["sections"]) == ["Tides of the North Sea"]
    assert spider.crawler.stats.get_value("article/truncated") == 1
