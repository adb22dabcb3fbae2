"""A packaged project's settings module in its crawls' settings (runtime.settings.project): beneath the scraper's,
the version's and the job's, above Trawl's defaults; its components join Trawl's; pins are named once, not applied."""

from __future__ import annotations

import logging
import sys

import pytest

from runtime.packaged.project_spiders import spiders_found
from runtime.settings.compose import project_layer_for, scrapy_settings_for
from runtime.settings.enforced import GUARD, GUARD_ORDER
from runtime.settings.project import ProjectLayer, project_settings_applied, refused_log, with_project_settings
from runtime.spec import CrawlSpec

PIPELINE = "myproject.pipelines.Tag"
MIDDLEWARE = "myproject.middlewares.Header"


def spec(**fields) -> CrawlSpec:
    base = {"job_id": "j", "attempt": 1, "url": "https://example.com/", "scraper": "s", "version": "1.0.0"}
    project = {"spider": "myproject.spiders.books.Books", "settings_module": "myproject.settings"}
    return CrawlSpec(**{**base, **project, **fields})


def layered(project: dict, **fields):
    crawl = spec(**fields)
    layer = project_layer_for(spec=crawl)
    return with_project_settings(scrapy_settings_for(spec=crawl), project, defaults=layer.defaults)


def test_the_project_beats_trawls_defaults_and_loses_to_scraper_version_and_job():
    project = {"USER_AGENT": "myproject (+https://me)", "DOWNLOAD_DELAY": 0.25, "RETRY_TIMES": 5, "LOG_LEVEL": "DEBUG"}

    merged, refused = layered(
        project,
        scraper_settings={"RETRY_TIMES": 2},
        version_settings={"LOG_LEVEL": "WARNING"},
    )

    assert (merged["USER_AGENT"], merged["DOWNLOAD_DELAY"]) == ("myproject (+https://me)", 0.25)
    assert (merged["RETRY_TIMES"], merged["LOG_LEVEL"]) == (2, "WARNING")
    assert refused == []
    merged, _ = layered(project, options={"useragent": "the job's"})
    assert merged["USER_AGENT"] == "the job's"


def test_the_projects_components_join_trawls_which_keep_their_orders():
    project = {
        "ITEM_PIPELINES": {PIPELINE: 300},
        "DOWNLOADER_MIDDLEWARES": {MIDDLEWARE: 543, "myproject.middlewares.Dropped": 100},
    }

    merged, refused = layered(
        project, version_settings={"DOWNLOADER_MIDDLEWARES": {"myproject.middlewares.Dropped": None}}
    )

    assert merged["ITEM_PIPELINES"][PIPELINE] == 300
    assert merged["DOWNLOADER_MIDDLEWARES"][MIDDLEWARE] == 543
    assert merged["DOWNLOADER_MIDDLEWARES"]["myproject.middlewares.Dropped"] is None  # the version's entry wins
    assert merged["DOWNLOADER_MIDDLEWARES"][GUARD] == GUARD_ORDER
    assert refused == []


def test_pinned_settings_the_project_sets_are_refused_and_named_once(caplog):
    project = {
        "TELNETCONSOLE_ENABLED": True,
        "AUTOTHROTTLE_ENABLED": True,
        "TRAWL_THROTTLE_ENABLED": False,
        "DOWNLOADER_MIDDLEWARES": {GUARD: None},
        "ROBOTSTXT_OBEY": True,  # Trawl's default too: not a pin
    }
    composed = scrapy_settings_for(spec=spec())

    merged, refused = layered(project)

    assert sorted(refused) == [
        "AUTOTHROTTLE_ENABLED",
        "DOWNLOADER_MIDDLEWARES",
        "TELNETCONSOLE_ENABLED",
        "TRAWL_THROTTLE_ENABLED",
    ]
    assert merged["TELNETCONSOLE_ENABLED"] is False and merged["AUTOTHROTTLE_ENABLED"] is False
    assert merged["TRAWL_THROTTLE_ENABLED"] == composed["TRAWL_THROTTLE_ENABLED"]
    assert merged["DOWNLOADER_MIDDLEWARES"][GUARD] == GUARD_ORDER
    layer = ProjectLayer(module="myproject.settings", defaults=frozenset())
    with caplog.at_level(logging.WARNING, logger="trawl.project"):
        refused_log(layer, refused)
    warnings = [r.getMessage() for r in caplog.records if r.name == "trawl.project"]
    assert len(warnings) == 1
    assert "myproject.settings" in warnings[0] and "AUTOTHROTTLE_ENABLED, DOWNLOADER_MIDDLEWARES" in warnings[0]


def test_the_layer_travels_as_a_plain_message_and_no_module_means_no_layer():
    layer = project_layer_for(spec=spec(version_settings={"USER_AGENT": "v"}))
    assert "USER_AGENT" not in layer.defaults and "RETRY_TIMES" in layer.defaults
    assert ProjectLayer.of_message(layer.message()) == layer
    assert ProjectLayer.of_message(None) is None
    assert project_layer_for(spec=spec(settings_module="")) is None
    assert project_settings_applied({"A": 1}, None) == ({"A": 1}, [])


@pytest.fixture
def startproject(tmp_path, monkeypatch):
    files = {
        "myproj_t/__init__.py": "",
        "myproj_t/settings.py": "SPIDER_MODULES = ['myproj_t.spiders']\nUSER_AGENT = 'myproj_t'\n",
        "myproj_t/spiders/__init__.py": "",
        "myproj_t/spiders/toscrape-css.py": "import scrapy\n\nclass Css(scrapy.Spider):\n    name = 'toscrape-css'\n",
        "myproj_t/spiders/books.py": "import scrapy\n\nclass Books(scrapy.Spider):\n    name = 'books'\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [name for name in sys.modules if name.startswith("myproj_t")]:
        del sys.modules[name]


def test_spiders_are_found_by_name_with_scrapys_loader_even_in_a_hyphenated_module(startproject):
    found = spiders_found("myproj_t.spiders.books.Books", settings_module="myproj_t.settings")

    assert found == {"books": "myproj_t.spiders.books.Books", "toscrape-css": "myproj_t.spiders.toscrape-css.Css"}
    layer = ProjectLayer(module="myproj_t.settings", defaults=frozenset({"USER_AGENT"}))
    merged, refused = project_settings_applied({"USER_AGENT": "Trawl"}, layer)
    assert (merged["USER_AGENT"], refused) == ("myproj_t", [])
