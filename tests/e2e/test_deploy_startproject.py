"""A `scrapy startproject` project deployed as it is, with real workers: no pyproject.toml or setup.py, two spiders
(one in `toscrape-css.py`), a pipeline (reading the project's settings with get_project_settings()), a middleware,
USER_AGENT and DOWNLOAD_DELAY in its settings.py. Each spider runs by its `name` from its own start_urls, the
project's settings reach the site, and a redeploy without --version is what the next job runs."""

from __future__ import annotations

import io
import textwrap
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

import pytest
from django.core.management import call_command

from crawls.models import CrawlJob
from items.models import Item
from registry.models import ScraperVersion
from tests.conftest import wait_for_job
from tests.e2e.packages_stack import package_dirs, package_worker  # noqa: F401 - fixtures
from tests.sites import ServedSite, write_catalogue

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
USER_AGENT = "myproject-bot/1.0 (+https://myproject.example)"

SETTINGS = f"""
BOT_NAME = "myproject"
SPIDER_MODULES = ["myproject.spiders"]
NEWSPIDER_MODULE = "myproject.spiders"
USER_AGENT = {USER_AGENT!r}
ROBOTSTXT_OBEY = True
DOWNLOAD_DELAY = 0.05
ITEM_PIPELINES = {{"myproject.pipelines.StampPipeline": 300}}
DOWNLOADER_MIDDLEWARES = {{"myproject.middlewares.HeaderMiddleware": 543}}
TELNETCONSOLE_ENABLED = True  # Trawl pins it off: named in the job's log, not applied
TWISTED_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
FEED_EXPORT_ENCODING = "utf-8"
"""
PIPELINES = """
from scrapy.utils.project import get_project_settings


class StampPipeline:
    def process_item(self, item, spider):
        item["stamped_by"] = "myproject.pipelines"
        item["bot"] = get_project_settings().get("BOT_NAME")  # as many projects read their own settings
        return item
"""
MIDDLEWARES = """
class HeaderMiddleware:
    def process_request(self, request, spider):
        request.headers["X-Myproject"] = spider.name
"""
BOOKS = """
import scrapy


class BooksSpider(scrapy.Spider):
    name = "books"
    start_urls = ["{site}/list-1.html"]

    def parse(self, response):
        for href in response.css("a.product::attr(href), a.next::attr(href)").getall():
            yield response.follow(href, self.parse)
        if title := response.css("h1::text").get():
            yield {{"url": response.url, "title": title, "spider": self.name, "code": "{code}"}}
"""
CSS = """
import scrapy


class ToScrapeCSSSpider(scrapy.Spider):
    name = "toscrape-css"
    start_urls = ["{site}/index.html"]

    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            if "/list-" in href or "/product-" in href:
                yield response.follow(href, self.parse)
        if price := response.css("span.price::text").get():
            yield {{"url": response.url, "price": price, "spider": self.name}}
"""


class HeadersSite(ServedSite):
    """Serves a directory and keeps every request's path and headers."""

    def __init__(self, root: Path) -> None:
        self.seen: list[tuple[str, dict[str, str]]] = []
        site = self

        class Handler(SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(root), **kwargs)

            def do_GET(self):
                site.seen.append((self.path, dict(self.headers)))
                return super().do_GET()

            def log_message(self, *args):
                pass

        super().__init__(Handler)


@pytest.fixture
def site(tmp_path):
    write_catalogue(tmp_path / "site", products=6, per_page=3)
    with HeadersSite(tmp_path / "site") as served:
        yield served


def startproject(root: Path, *, site: str, code: str) -> Path:
    files = {
        "scrapy.cfg": "[settings]\ndefault = myproject.settings\n\n[deploy]\nproject = myproject\n",
        "myproject/__init__.py": "",
        "myproject/items.py": "",
        "myproject/settings.py": SETTINGS,
        "myproject/pipelines.py": PIPELINES,
        "myproject/middlewares.py": MIDDLEWARES,
        "myproject/spiders/__init__.py": "",
        "myproject/spiders/books.py": BOOKS.format(site=site, code=code),
        "myproject/spiders/toscrape-css.py": CSS.format(site=site),
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root


def tree(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def deploy(project: Path) -> str:
    out = io.StringIO()
    call_command("deploy", str(project), "--timeout", "300", stdout=out)
    return out.getvalue()


def run(api, worker, spider: str) -> tuple[CrawlJob, list[dict]]:
    response = api.post("/api/jobs/", {"scraper": "myproject", "spider": spider}, format="json")
    assert response.status_code == 201, response.content
    try:
        job = wait_for_job(response.json()["id"], timeout=180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- worker log ---\n{worker.log_tail()}") from None
    assert job.status == "succeeded", f"{job.error_class}: {job.error_message}\n{worker.log_tail()}"
    return job, [item.data for item in Item.objects.filter(last_job=job)]


def test_a_startproject_project_deploys_as_it_is_and_runs_each_spider_by_name(package_worker, site, api, tmp_path):  # noqa: F811 - pytest fixture
    project = startproject(tmp_path / "myproject", site=site.url, code="v1")
    before = tree(project)

    printed = deploy(project)

    assert tree(project) == before, "the user's directory is unchanged"
    assert "setup generated in the build copy" in printed and "created scraper 'myproject'" in printed
    assert "spiders: books, toscrape-css" in printed
    version = ScraperVersion.objects.get(scraper__name="myproject")
    assert (version.version, version.is_default, version.settings_module) == ("1.0.0", True, "myproject.settings")
    assert version.spiders == {
        "books": "myproject.spiders.books.BooksSpider",
        "toscrape-css": "myproject.spiders.toscrape-css.ToScrapeCSSSpider",
    }

    job, books = run(api, package_worker, "books")
    assert sorted(item["title"] for item in books) == [f"Product {n}" for n in range(1, 7)]
    assert {(item["spider"], item["code"], item["stamped_by"], item["bot"]) for item in books} == {
        ("books", "v1", "myproject.pipelines", "myproject")  # get_project_settings(): the project's, not Scrapy's
    }
    log = api.get(f"/api/jobs/{job.pk}/log/").content.decode()
    assert log.count("which Trawl pins") == 1 and "TELNETCONSOLE_ENABLED" in log, log
    _, prices = run(api, package_worker, "toscrape-css")
    assert len(prices) == 6 and {(i["spider"], i["stamped_by"]) for i in prices} == {
        ("toscrape-css", "myproject.pipelines")
    }
    pages = [(path, headers) for path, headers in site.seen if path != "/robots.txt"]
    assert {path for path, _ in pages} >= {"/index.html", "/list-1.html", "/product-6.html"}
    assert {headers.get("User-Agent") for _, headers in site.seen} == {USER_AGENT}
    assert {headers.get("X-Myproject") for path, headers in pages if path != "/index.html"} == {
        "books",
        "toscrape-css",
    }
    assert all(headers.get("X-Myproject") for _, headers in pages), "the middleware ran on every request"

    (project / "myproject/spiders/books.py").write_text(textwrap.dedent(BOOKS.format(site=site.url, code="v2")))
    printed = deploy(project)

    assert "live: myproject 1.0.1 is the default now, replacing 1.0.0" in printed
    _, books = run(api, package_worker, "books")
    assert {item["code"] for item in books} == {"v2"}
