"""Requester regexes on RE2: what compiles, what is refused and where, and that the spiders and every way in to a
job (API, batch, service, CLI, source) use the same check."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from scrapy.http import HtmlResponse, Request

from crawls.models import CrawlJob
from crawls.services import job_create
from crawls.services.batches import batch_create
from project.errors import TrawlError
from runtime.inputs.checks import InputBounds, config_check, options_check
from runtime.inputs.patterns import MAX_PATTERN_LENGTH, MAX_PATTERNS, PatternError, pattern_compile, patterns_compile
from runtime.spiders.link import LinkSpider
from runtime.spiders.selectors import SelectorsSpider
from runtime.spiders.sitemap import SitemapSpider
from sources.models import Source
from sources.services.sources import source_create

CATASTROPHIC_URL = "http://shop.test/" + "a" * 5000 + "!"  # Python's re would try 2**5000 splits of it

BOUNDS = InputBounds(attrs_bytes=100, sitemap_urls=1000)


# --- the pattern module ----------------------------------------------------------------------------------------


def test_a_backtracking_pattern_compiles_and_answers_at_once_on_re2():
    patterns = patterns_compile([r"(a+)+$", r"(x+x+)+y"], field="allow_regex")

    assert patterns.search(CATASTROPHIC_URL) is False
    assert patterns.search("http://shop.test/aaa") is True
    assert patterns.search("http://shop.test/xxy") is True


def test_one_string_is_one_pattern_and_nothing_is_no_filter():
    assert patterns_compile("/product/", field="allow").search("http://shop.test/product/1")
    for nothing in (None, "", []):
        assert not patterns_compile(nothing, field="allow")


@pytest.mark.parametrize(
    "pattern", [r"(a)\1", r"(?=a)b", r"(?!a)b", r"(?<=a)b", r"(?<!a)b", r"\Z", "(unclosed", "*bad", "a{1001}"]
)
def test_what_re2_cannot_run_is_refused_naming_the_field_and_index(pattern):
    with pytest.raises(PatternError) as refused:
        patterns_compile(["ok", pattern], field="deny_regex")

    assert refused.value.field == "deny_regex.1"
    assert "linear time" in refused.value.message and "RE2" in refused.value.message


@pytest.mark.parametrize(
    ("values", "says"),
    [
        (["x" * (MAX_PATTERN_LENGTH + 1)], f"at most {MAX_PATTERN_LENGTH} characters"),
        (["a"] * (MAX_PATTERNS + 1), f"at most {MAX_PATTERNS} patterns"),
        ([3], "a pattern is a string"),
        ({"a": 1}, "a list of patterns"),
        (["\ud800"], "valid Unicode"),
    ],
)
def test_sizes_and_types_are_capped(values, says):
    with pytest.raises(PatternError, match=says):
        patterns_compile(values, field="allow")


def test_re2_syntax_that_python_users_write_is_accepted():
    for pattern in (r"/(product|cat)/?", r"(?P<id>\d+)\.html$", r"(?i)SALE", r"[[:alpha:]]+", r"^https?://[^/]+/"):
        pattern_compile(pattern, field="allow_regex")


# --- a job's options and a spider's config ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"allow_regex": [r"(a)\1"]}, "allow_regex.0"),
        ({"config": {"allow": [r"(?=x)"]}}, "config.allow.0"),
        ({"config": {"follow": r"(\d)\1"}}, "config.follow.0"),
        ({"config": {"fields": {"t": "xpath://p[re:test(., 'a')]"}}}, "config.fields.t"),
        ({"config": {"children": {"config": {"deny": [r"(a)\1"]}}}}, "config.children.config.deny.0"),
        ({"config": "allow"}, "config"),
        ({"attrs": {"note": "x" * 101}}, "attrs"),
        ({"attrs": ["a"]}, "attrs"),
        ({"config": {"max_urls": 1001}}, "config.max_urls"),
        ({"config": {"max_urls": "5"}}, "config.max_urls"),
        ({"config": {"max_urls": 0}}, "config.max_urls"),
        ({"config": {"children": {"config": {"max_urls": 10**9}}}}, "config.children.config.max_urls"),
    ],
)
def test_options_check_names_the_first_bad_field(options, field):
    with pytest.raises(PatternError) as refused:
        options_check(options, bounds=BOUNDS)

    assert refused.value.field == field


def test_good_options_and_other_spiders_config_pass():
    options_check(
        {"allow_regex": ["/p/"], "maxdepth": 2, "config": {"allow": "/p/", "fields": {"t": "h1::text"}}},
        bounds=BOUNDS,
    )
    config_check({"count": 2000, "children": {"scraper": "selectors"}}, bounds=BOUNDS)
    options_check({"attrs": {"note": "x" * 80}, "config": {"max_urls": 1000}}, bounds=BOUNDS)


# --- the spiders refuse at start (options stored before the check) ---------------------------------------------


def test_the_link_spider_filters_links_with_re2():
    spider = LinkSpider(url="http://shop.test/", options={"maxdepth": 1, "allow_regex": [r"(a+)+$", "page"]})
    body = f'<a href="{CATASTROPHIC_URL}">trap</a><a href="/page-1">one</a><a href="/aaaa">a</a>'
    response = HtmlResponse("http://shop.test/", body=body.encode(), request=Request("http://shop.test/"))

    followed = [request.url for request in spider.parse(response) if isinstance(request, Request)]

    assert followed == ["http://shop.test/page-1", "http://shop.test/aaaa"]


@pytest.mark.parametrize(
    ("spider", "kwargs", "field"),
    [
        (LinkSpider, {"options": {"allow_regex": [r"(a)\1"]}}, "allow_regex.0"),
        (LinkSpider, {"options": {"deny_regex": [r"(?=a)"]}}, "deny_regex.0"),
        (SitemapSpider, {"config": {"allow": [r"(?<=a)b"]}}, "config.allow.0"),
        (SitemapSpider, {"config": {"follow": [r"(a)\1"]}}, "config.follow.0"),
        (SelectorsSpider, {"config": {"fields": {"t": "xpath://p[re:test(., '(a+)+$')]"}}}, "config.fields.t"),
        (SelectorsSpider, {"config": {"fields": {"t": "h1"}, "item": "xpath://div[php:function('f')]"}}, "config.item"),
    ],
)
def test_spiders_refuse_at_start_naming_the_field(spider, kwargs, field):
    with pytest.raises(PatternError) as refused:
        spider(url="http://shop.test/", **kwargs)

    assert refused.value.field == field and field in str(refused.value)


# --- every way in ----------------------------------------------------------------------------------------------

BAD = {"allow_regex": [r"(a)\1"]}


def test_job_create_refuses_naming_options(builtins):
    with pytest.raises(TrawlError) as refused:
        job_create(url="http://shop.test/", options=BAD)

    assert refused.value.field == "options" and "allow_regex.0" in refused.value.message
    assert not CrawlJob.objects.exists()


def test_batch_create_refuses_naming_the_spec_and_options(builtins):
    with pytest.raises(TrawlError) as refused:
        batch_create(jobs=[{"url": "http://shop.test/"}, {"url": "http://shop.test/", "options": BAD}])

    assert "allow_regex.0" in refused.value.as_dict()["jobs"]["1"]["options"][0]
    assert not CrawlJob.objects.exists()


def test_the_crawl_command_refuses_naming_options(builtins):
    with pytest.raises(CommandError, match=r"options\.allow_regex\.0: "):
        call_command("crawl", "http://shop.test/", "--options", '{"allow_regex": ["(a)\\\\1"]}')

    assert not CrawlJob.objects.exists()


@pytest.mark.parametrize(
    "config",
    [
        {"allow": [r"(a)\1"]},
        {"fields": {"price": "xpath://span[re:test(., '^(a+)+$')]"}},
        {"children": {"config": {"follow": [r"(?=a)"]}}},
    ],
)
def test_a_source_config_is_refused_naming_config(builtins, config):
    with pytest.raises(TrawlError) as refused:
        source_create(url="http://shop.test/sitemap.xml", kind="sitemap", config=config)

    assert refused.value.field == "config"
    assert not Source.objects.exists()


def test_the_api_names_the_option_and_index(api, builtins):
    response = api.post("/api/jobs/", {"url": "http://shop.test/", "options": BAD}, format="json")

    assert response.status_code == 400
    assert "linear time" in response.json()["options"]["allow_regex"]["0"][0]


def test_the_api_names_the_config_key(api, builtins):
    options = {"config": {"fields": {"title": "xpath://h1[re:test(., 'a')]"}}}
    response = api.post("/api/jobs/", {"url": "http://shop.test/", "scraper": "selectors", "options": options}, "json")

    assert response.status_code == 400
    assert "re:test" in response.json()["options"]["config"]["fields"]["title"][0]
