"""Spider arguments (`args`): what the API, batches, sources and `manage.py crawl -a` accept and refuse, and how they
reach the spider's keyword arguments beside Trawl's own."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from crawls.models import CrawlJob
from crawls.services.crawl_spec import crawl_spec_build, spider_kwargs
from crawls.services.jobs import job_create
from project.errors import TrawlError
from registry.models import Scraper
from runtime.inputs.args import MAX_ARGS, MAX_VALUE_CHARS, SCRAPY_ATTRIBUTES, SpiderArgsError, spider_args_check
from runtime.packaged.child_db import CallScope
from sources.models import Source
from sources.services.sources import source_crawl_now, source_create, source_update
from tests.sources.sources_helpers import dispatch, free_lease

__all__ = ["free_lease"]  # fixture
pytestmark = pytest.mark.django_db

URL = "http://shop.test/list-1.html"
ARGS = {"category": "books", "query": " two words = one ", "empty": ""}
REFUSED = {
    "Trawl's own name": ({"url": "http://elsewhere.test/"}, "Trawl passes this one itself"),
    "Trawl's config": ({"config": "{}"}, "Trawl passes this one itself"),
    "a Scrapy setting": ({"download_delay": "0"}, "Scrapy reads this spider attribute itself"),
    "Scrapy's spider name": ({"name": "other"}, "Scrapy reads this spider attribute itself"),
    "not an identifier": ({"my-arg": "x"}, "is not an argument name"),
    "private": ({"_secret": "x"}, "is not an argument name"),
    "a number": ({"pages": 3}, "string"),
    "a list": ({"tags": ["a"]}, "string"),
    "too long": ({"q": "x" * (MAX_VALUE_CHARS + 1)}, str(MAX_VALUE_CHARS)),
    "too many": ({f"a{n}": "x" for n in range(MAX_ARGS + 1)}, f"at most {MAX_ARGS}"),
    "not an object": (["category=books"], "object"),
}


def refusal_text(body: dict) -> str:
    return str(body["args"])


def test_a_jobs_args_are_stored_shown_and_reach_the_spider_beside_trawls_own(api, builtins):
    response = api.post("/api/jobs/", {"url": URL, "args": ARGS}, format="json")

    assert response.status_code == 201, response.content
    assert response.json()["args"] == ARGS
    job = CrawlJob.objects.select_related("scraper", "source").get(pk=response.json()["id"])
    assert api.get(f"/api/jobs/{job.pk}/").json()["args"] == ARGS
    spec = crawl_spec_build(job=job, version=job.scraper.versions.get())
    kwargs = spider_kwargs(job, args=spec.args)
    assert spec.args == ARGS and {name: kwargs[name] for name in ARGS} == ARGS
    assert (kwargs["url"], kwargs["start_urls"], kwargs["strategy"]) == (URL, [URL], "deep")


def test_trawls_own_keyword_arguments_win_over_args_that_slipped_past_the_checks(api, builtins):
    job = CrawlJob.objects.create(url=URL, scraper=Scraper.objects.get(name="link"))
    kwargs = spider_kwargs(job, args={"url": "http://evil.test/", "config": {"proxy_group": "theirs"}})

    assert kwargs["url"] == URL and kwargs["config"] == {}
    scope = CallScope.of_crawl(
        settings={"TRAWL_PROXY_GROUP": "default", "TRAWL_PROXY_COOLDOWN": 1}, spider_kwargs=kwargs
    )
    assert scope.groups == {"default"}  # a packaged crawl may ask for no proxy group an argument names


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_api_refuses_bad_args_naming_the_field(api, builtins, case):
    args, message = REFUSED[case]
    response = api.post("/api/jobs/", {"url": URL, "args": args}, format="json")

    assert response.status_code == 400, response.content
    assert list(response.json()) == ["args"] and message in refusal_text(response.json()), response.json()
    with pytest.raises(SpiderArgsError):
        spider_args_check(args)
    assert not CrawlJob.objects.exists()


@pytest.mark.parametrize("case", ["Trawl's own name", "a Scrapy setting", "a number"])
def test_the_service_refuses_what_the_api_refuses(builtins, case):
    with pytest.raises(TrawlError) as refused:
        job_create(url=URL, args=REFUSED[case][0])
    assert refused.value.field == "args" and REFUSED[case][1] in refused.value.message


def test_every_attribute_of_scrapys_spider_is_refused_as_a_name():
    import scrapy

    public = {name for name in dir(scrapy.Spider) if not name.startswith("_")}
    assert public <= set(SCRAPY_ATTRIBUTES)


def test_a_batch_carries_each_jobs_args_and_names_a_bad_spec(api, builtins):
    jobs = [{"url": URL, "args": {"category": "books"}}, {"url": "http://shop.test/list-2.html"}]
    response = api.post("/api/batches/", {"jobs": jobs}, format="json")
    assert response.status_code == 201, response.content
    assert sorted(str(job.args) for job in CrawlJob.objects.all()) == ["{'category': 'books'}", "{}"]

    bad = api.post("/api/batches/", {"jobs": [{"url": URL}, {"url": URL, "args": {"url": "x"}}]}, format="json")
    assert bad.status_code == 400 and list(bad.json()["jobs"]["1"]) == ["args"], bad.content


def test_a_sources_args_go_with_every_job_it_runs(api, builtins, admin_api, sent_tasks):
    response = admin_api.post("/api/sources/", {"url": URL, "args": {"category": "books"}}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["args"] == {"category": "books"}
    source_id = response.json()["id"]

    (job,) = dispatch()
    assert job.args == {"category": "books"}
    CrawlJob.objects.filter(pk=job.pk).update(status="succeeded")
    source = source_update(source=Source.objects.get(pk=source_id), args={"category": "music"})
    assert source_crawl_now(source=source).args == {"category": "music"}


def test_a_source_refuses_bad_args_naming_the_field(admin_api, builtins):
    response = admin_api.post("/api/sources/", {"url": URL, "args": {"strategy": "deep"}}, format="json")
    assert response.status_code == 400 and list(response.json()) == ["args"], response.content
    with pytest.raises(TrawlError) as refused:
        source_create(url=URL, args={"download_timeout": "1"})
    assert refused.value.field == "args"


def test_the_cli_passes_each_dash_a_as_scrapy_crawl_does(builtins):
    out = io.StringIO()
    call_command(
        "crawl", URL, "-a", "category=books", "-a", "query=a=b", "-a", "empty=", "-a", "category=toys", stdout=out
    )

    job = CrawlJob.objects.get(pk=out.getvalue().strip())
    assert job.args == {"category": "toys", "query": "a=b", "empty": ""}


@pytest.mark.parametrize(
    ("flag", "message"),
    [("category", "args: -a takes NAME=VALUE, got 'category'"), ("url=x", "args: url: Trawl passes this one itself")],
)
def test_the_cli_refuses_a_bad_dash_a_with_the_apis_field(builtins, flag, message):
    with pytest.raises(CommandError) as refused:
        call_command("crawl", URL, "-a", flag)
    assert refused.value.returncode == 2 and str(refused.value).startswith(message)
    assert not CrawlJob.objects.exists()
