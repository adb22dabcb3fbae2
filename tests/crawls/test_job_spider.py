"""A job names a spider of its version by its Scrapy `name` (`spider`); its URL is optional then (the spider's own
start_urls). Refused at submission when the versions it may route to know their spiders; else routing decides."""

from __future__ import annotations

import pytest

from crawls.models import CrawlJob
from crawls.services.crawl_spec import crawl_spec_build, spider_kwargs, spider_path_of
from project.errors import TrawlError
from registry.models import Scraper, ScraperVersion
from tests.registry.factories import LINK_SPIDER

pytestmark = pytest.mark.django_db

SPIDERS = {"books": "myproject.spiders.books.Books", "toscrape-css": "myproject.spiders.toscrape-css.Css"}


@pytest.fixture
def project_version(builtins):
    scraper = Scraper.objects.create(name="myproject")
    return ScraperVersion.objects.create(
        scraper=scraper,
        version="1.0.0",
        spider=SPIDERS["books"],
        spiders=SPIDERS,
        settings_module="myproject.settings",
        is_default=True,
    )


def test_a_job_names_a_spider_and_may_leave_out_its_url(api, project_version):
    response = api.post("/api/jobs/", {"scraper": "myproject", "spider": "toscrape-css"}, format="json")

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["spider"], body["url"]) == ("toscrape-css", "")
    job = CrawlJob.objects.get(pk=body["id"])
    spec = crawl_spec_build(job=job, version=project_version)
    assert (spec.spider, spec.settings_module) == (SPIDERS["toscrape-css"], "myproject.settings")
    kwargs = spider_kwargs(job, args={})
    assert "url" not in kwargs and "start_urls" not in kwargs, "the spider's own start_urls are used"


def test_a_url_is_required_without_a_spider_and_an_unknown_name_is_refused(api, project_version):
    response = api.post("/api/jobs/", {"scraper": "myproject"}, format="json")
    assert response.status_code == 400 and "url" in response.json()

    response = api.post("/api/jobs/", {"scraper": "myproject", "spider": "nope"}, format="json")
    assert response.status_code == 400
    assert "no spider named 'nope' (it has: books, toscrape-css)" in str(response.json()["spider"])
    pinned = {"scraper": "myproject", "version": "1.0.0", "spider": "nope", "url": "http://shop.test/"}
    assert api.post("/api/jobs/", pinned, format="json").status_code == 400


def test_with_url_and_spider_the_spider_starts_at_the_url(api, project_version):
    spec = {"scraper": "myproject", "spider": "books", "url": "http://shop.test/list.html"}
    job = CrawlJob.objects.get(pk=api.post("/api/jobs/", spec, format="json").json()["id"])
    assert spider_kwargs(job, args={})["start_urls"] == ["http://shop.test/list.html"]


def test_a_version_whose_spiders_are_not_known_yet_leaves_the_name_to_routing(api, project_version):
    unbuilt = ScraperVersion.objects.create(
        scraper=project_version.scraper, version="1.1.0", spider=SPIDERS["books"], package_status="building"
    )
    spec = {"scraper": "myproject", "version": "1.1.0", "spider": "nope", "url": "http://shop.test/"}
    # Accepted: its spiders are found when it is built; the job then fails `routing` if the name is unknown.
    assert api.post("/api/jobs/", spec, format="json").status_code == 201
    job = CrawlJob(scraper=project_version.scraper, spider="nope", url="")
    unbuilt.spiders = {"books": SPIDERS["books"]}
    with pytest.raises(TrawlError, match=r"no spider named 'nope' \(it has: books\)"):
        spider_path_of(job=job, version=unbuilt)


def test_without_a_name_the_versions_own_spider_runs_and_an_in_process_version_checks_it_when_loaded(builtins):
    version = ScraperVersion.objects.get(scraper__name="link", is_default=True)
    assert spider_path_of(job=CrawlJob(spider=""), version=version) == version.spider == LINK_SPIDER
    assert spider_path_of(job=CrawlJob(spider="link"), version=version) == LINK_SPIDER


def test_a_sources_config_names_the_spider_its_jobs_run(project_version):
    from django.utils import timezone

    from tests.sources.sources_helpers import dispatch, make_source

    make_source(project_version.scraper, 1, next_sync_at=timezone.now(), config={"spider": "toscrape-css"})

    (job,) = dispatch(now=timezone.now())

    assert (job.spider, job.url) == ("toscrape-css", "http://shop.test/list-1.html")
