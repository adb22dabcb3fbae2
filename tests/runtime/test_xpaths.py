"""Requester selectors: XPath and CSS as scrapers write them pass; extension functions and whole-document walks
inside predicates are refused, naming the field."""

from __future__ import annotations

import pytest
from parsel import Selector

from runtime.inputs.patterns import PatternError
from runtime.inputs.xpaths import MAX_FIELDS, MAX_PREDICATE_DEPTH, MAX_SELECTOR_LENGTH, selector_check
from runtime.spiders.selectors import SelectorsSpider
from tests.runtime.spider_pages import START, page, run

EVERYDAY = [
    "h1::text",
    ".product a",
    "img::attr(src)",
    "li:nth-child(2n+1)",
    "div:has(> a.x)",
    "a:not(.x)",
    "xpath://h1/text()",
    "xpath://div[@class='card']//a/@href",
    "xpath://td[contains(., 'Price')]/following-sibling::td[1]/text()",
    "xpath:count(//a)",
    "xpath://div[a[@href]]",
    "xpath://a[position() mod 2 = 0]",
    "xpath://*[has-class('price')]/text()",
    "xpath:(//a)[1]",
    "xpath://li[.//a and not(@hidden)]",
    "xpath:normalize-space(//h1)",
    "xpath://a[@href != '/x']",
    "xpath://div[2 * 3 > 1]",
    "xpath://p[. = 're:test(x)']",  # a literal, not a call
    # Walks one level deep (nodes x depth at worst), as extraction XPath and CSS are written.
    'xpath://div[@class="price"]/text()',
    'xpath://a[contains(@href, "x")]/@href',
    "xpath:.//h1[1]",
    "xpath://tr[td[2]]",
    "xpath://*[count(.//*)>1]",
    "xpath://div//a[contains(., 'Buy')]/@href",
    "xpath://a[contains(., 'Buy')]/ancestor::div[1]",
    "xpath://*[count(.//*[count(*)>0])>1]",
    "xpath://li[count(preceding-sibling::li) < 3]",
    "xpath:-count(//a) + 2",
    "xpath://a | //b",
    "xpath://a[.5 < 1]/..",
    "xpath:string(.)",
    "div li:first-child",
    "table tr:nth-child(2) td::text",
    ".product a::attr(href)",
    "ul > li:not(.x) + li",
]


@pytest.mark.parametrize("spec", EVERYDAY)
def test_everyday_selectors_pass_and_run(spec):
    assert selector_check(spec, field="f") == spec
    html = Selector(text="<html><body><div class='card'><a href='/p'>p</a></div><h1>T</h1></body></html>")
    if spec.startswith("xpath:"):
        html.xpath(spec[6:]).getall()
    else:
        html.css(spec).getall()


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("xpath://p[re:test(., '(a+)+$')]", "extension functions"),
        ("xpath://p[re : test(., 'a')]", "extension functions"),
        ("xpath:re:replace(//p, '(a+)+$', 'g', '')", "extension functions"),
        ("xpath:set:distinct(//a)", "extension functions"),
        ("xpath:exsl:node-set(//a)", "extension functions"),
        ("xpath:php:function('system')", "extension functions"),
        ("xpath://a[$x]", "variables"),
        ("xpath:foo()", "function foo()"),
        ("xpath://*[count(//*) > 0]", "absolute path"),
        ("xpath://a[x = //b]", "absolute path"),
        ("xpath://a[2 * //b]", "absolute path"),
        ("xpath://a[(//b)]", "absolute path"),
        ("xpath://*[following::a]", "following axis"),
        ("xpath://*[preceding::a]", "preceding axis"),
        ("xpath:" + "//a[b" * (MAX_PREDICATE_DEPTH + 1) + "]" * (MAX_PREDICATE_DEPTH + 1), "nested predicates"),
        # Walks inside walks inside walks (runtime/inputs/xpath_cost.py): nodes x depth² and worse.
        ("xpath://*[count(.//*[count(.//*)>1])>1]", "walk inside a walk"),
        ("xpath://*[count(.//*//*)>1]", "walk inside a walk"),
        ("xpath://div[.//a[contains(., 'Buy')]]", "walk inside a walk"),
        ("xpath://div/descendant::div[contains(., 'x')]", "walk inside a walk"),
        ("xpath://*[ancestor::*[count(ancestor::*)>1]]", "walk inside a walk"),
        ("xpath://*[.//* = 'x']", "walk inside a walk"),
        ("xpath://a[@x = .//b]", "walk inside a walk"),
        ("xpath://li[count(preceding-sibling::*[count(following-sibling::*)>0])>1]", "walk inside a walk"),
        ("xpath://*[normalize-space(.//p[normalize-space()])]", "walk inside a walk"),
        ("div:has(a b)", "walk inside a walk"),
        # A field that copies the page again and again: 100 x a 1 MB page is a 100 MB string in 27 s.
        ("xpath:concat(" + ",".join(["/"] * 100) + ")", "100 arguments that are not literals"),
        ("xpath:concat(//a, //b, //c, //d, //e)", "5 arguments that are not literals"),
        ("xpath://a[", "not a valid XPath"),
        ("a[", "not a valid CSS selector"),
        ("xpath://a[@x='\x00']", "not a valid XPath"),
        ("xpath://a[@x='" + "y" * MAX_SELECTOR_LENGTH + "']", f"at most {MAX_SELECTOR_LENGTH} characters"),
        ("", "non-empty string"),
    ],
)
def test_refused_selectors_say_why_and_name_the_field(spec, says):
    with pytest.raises(PatternError, match=says) as refused:
        selector_check(spec, field="config.fields.price")

    assert refused.value.field == "config.fields.price"


def test_css_runs_as_the_xpath_that_was_measured():
    """`div li:first-child` counts each li's siblings once (a merged walk), not once per ancestor div: the same
    elements. A descendant combinator without a sibling test keeps parsel's `descendant::`."""
    from runtime.inputs.xpaths import css_xpath

    html = Selector(text="<div><div><ul><li>a</li><li>b</li></ul></div></div><li>c</li>")

    assert css_xpath("div li:first-child") == (
        "descendant-or-self::div/descendant-or-self::*/li[count(preceding-sibling::*) = 0]"
    )
    assert css_xpath("div a") == "descendant-or-self::div/descendant::a"
    for css in ("div li:first-child::text", "div li::text", "div li:last-child::text"):
        assert html.xpath(css_xpath(css)).getall() == html.css(css).getall()


def test_a_css_selector_is_held_to_the_same_rules_as_its_xpath():
    with pytest.raises(PatternError, match="nested predicates"):
        selector_check("div:has(a:has(b:has(c)))", field="config.item")


def test_too_many_fields_are_refused():
    from runtime.inputs.xpaths import selectors_config_check

    with pytest.raises(PatternError, match=f"at most {MAX_FIELDS} fields"):
        selectors_config_check({"fields": {f"f{n}": "h1" for n in range(MAX_FIELDS + 1)}})


# --- the selectors spider's page budget ---


def test_item_extraction_stops_when_the_page_budget_is_spent():
    """A selector matching every element, with fields walking the whole page, cannot hold the reactor for long: past
    TRAWL_SELECTORS_PAGE_SECONDS (0 here: spent before the first block) the page yields no more items."""
    from tests.crawler import trawl_crawler

    config = {"item": "*", "fields": {"t": "xpath://*"}, "next_page": "a.next"}
    crawler = trawl_crawler(SelectorsSpider, {"TRAWL_SELECTORS_PAGE_SECONDS": 0})
    spider = SelectorsSpider.from_crawler(crawler, url=START, options={}, config=config)

    items, requests = run(spider.parse(page()))

    assert items == [] and crawler.stats.get_value("selectors/over_budget") == 1
    assert [request.url for request in requests] == ["http://shop.test:8080/list-2.html"]  # links are still followed


def test_an_item_is_built_no_further_once_a_field_is_over_its_bound():
    """The fields after an oversize one are not extracted: up to 50 fields each a page long are never held at once
    (the item bound, runtime/items/bounds.py, drops the item)."""
    from tests.crawler import trawl_crawler

    crawler = trawl_crawler(SelectorsSpider, {"TRAWL_ITEM_FIELD_MAX_BYTES": 10})
    fields = {"a": "xpath:string(/)", "b": "xpath:string(/)", "c": "h2"}
    spider = SelectorsSpider.from_crawler(crawler, url=START, options={}, config={"fields": fields})

    item = spider.item_from(page().selector, page())

    assert list(item) == ["a", "url"] and len(item["a"]) > 10


def test_item_extraction_within_the_budget_takes_every_block():
    from tests.crawler import trawl_crawler

    crawler = trawl_crawler(SelectorsSpider)
    spider = SelectorsSpider.from_crawler(
        crawler, url=START, options={}, config={"item": ".card", "fields": {"t": "h2"}}
    )

    items, _ = run(spider.parse(page()))

    assert len(items) == 3 and crawler.stats.get_value("selectors/over_budget") is None
