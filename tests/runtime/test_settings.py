"""The Scrapy settings one crawl runs with: defaults < scraper < version < job options, with safety enforced."""

from __future__ import annotations

import pytest
from django.test import override_settings

from crawls.models import CrawlJob
from crawls.services.crawl_spec import crawl_spec_build
from registry.models import Scraper, ScraperVersion
from runtime.settings.compose import scrapy_settings_for

pytestmark = pytest.mark.django_db

SPIDER = "runtime.spiders.link.LinkSpider"


def layered(*, scraper=None, version=None, options=None, name="shop"):
    owner = Scraper.objects.create(name=name, settings=scraper or {})
    used = ScraperVersion.objects.create(scraper=owner, version="1.0.0", spider=SPIDER, settings=version or {})
    job = CrawlJob.objects.create(url="http://shop.test/", scraper=owner, options=options or {})
    return scrapy_settings_for(spec=crawl_spec_build(job=job, version=used))


def test_defaults_apply_when_nothing_overrides_them():
    merged = layered()

    assert merged["ROBOTSTXT_OBEY"] is True
    assert merged["CONCURRENT_REQUESTS"] == 16
    assert merged["USER_AGENT"].startswith("Trawl/")


def test_a_page_is_capped_at_32_mib_unless_a_version_says_otherwise():
    """A requester's site decides its page sizes: Scrapy's 1 GiB default would let one page hold the reactor."""
    assert layered()["DOWNLOAD_MAXSIZE"] == 32 * 1024 * 1024
    assert layered(name="files", version={"DOWNLOAD_MAXSIZE": 0})["DOWNLOAD_MAXSIZE"] == 0


def test_scraper_overrides_defaults():
    merged = layered(scraper={"CONCURRENT_REQUESTS": 4, "ROBOTSTXT_OBEY": False})

    assert merged["CONCURRENT_REQUESTS"] == 4
    assert merged["ROBOTSTXT_OBEY"] is False


def test_version_overrides_scraper():
    merged = layered(scraper={"CONCURRENT_REQUESTS": 4, "DOWNLOAD_DELAY": 1}, version={"CONCURRENT_REQUESTS": 2})

    assert merged["CONCURRENT_REQUESTS"] == 2
    assert merged["DOWNLOAD_DELAY"] == 1


def test_job_useragent_overrides_everything():
    merged = layered(scraper={"USER_AGENT": "scraper"}, version={"USER_AGENT": "version"}, options={"useragent": "job"})

    assert merged["USER_AGENT"] == "job"


def test_version_useragent_applies_when_the_job_sets_none():
    assert layered(scraper={"USER_AGENT": "scraper"}, version={"USER_AGENT": "version"})["USER_AGENT"] == "version"


def test_telnet_and_remote_control_stay_off_whatever_a_version_says():
    merged = layered(
        scraper={"TELNETCONSOLE_ENABLED": True},
        version={"TELNETCONSOLE_ENABLED": True, "REMOTE_CONTROL_ENABLED": True},
    )

    assert merged["TELNETCONSOLE_ENABLED"] is False
    assert merged["REMOTE_CONTROL_ENABLED"] is False


def test_telnet_and_remote_control_are_left_out_not_only_switched_off():
    """Scrapy imports an extension before it asks whether it is on: left out of EXTENSIONS_BASE, their modules (the
    remote control's aiohttp server) are never loaded into a crawling process, whatever a version sets there."""
    telnet, remote = "scrapy.extensions.telnet.TelnetConsole", "scrapy.extensions.remote_control.RemoteControl"
    merged = layered(version={"EXTENSIONS_BASE": {telnet: 0, remote: 0}})

    assert {telnet, remote} & set(merged["EXTENSIONS_BASE"]) == set()
    assert "scrapy.extensions.corestats.CoreStats" in merged["EXTENSIONS_BASE"]  # Scrapy's others stay


@override_settings(
    TRAWL_SCRAPY_EXTENSIONS={"trawl.Heartbeat": 500}, TRAWL_SCRAPY_DOWNLOADER_MIDDLEWARES={"trawl.Throttle": 600}
)
def test_version_components_add_to_trawls_own():
    merged = layered(
        version={"EXTENSIONS": {"custom.Ext": 100}, "DOWNLOADER_MIDDLEWARES": {"custom.Proxy": 700}},
    )

    assert merged["EXTENSIONS"] == {"trawl.Heartbeat": 500, "custom.Ext": 100}
    assert merged["DOWNLOADER_MIDDLEWARES"] == {
        "trawl.Throttle": 600,
        "custom.Proxy": 700,
        "runtime.guard.guard.PrivateTargetGuard": 790,  # always there; on only for guarded crawls
        "runtime.guard.schemes.SchemeGate": -(10**9),  # always there, first
    }


def test_no_version_can_drop_the_private_target_guard(settings):
    settings.TRAWL_BLOCK_PRIVATE_TARGETS = True
    merged = layered(version={"DOWNLOADER_MIDDLEWARES": {"runtime.guard.guard.PrivateTargetGuard": None}})

    assert merged["DOWNLOADER_MIDDLEWARES"]["runtime.guard.guard.PrivateTargetGuard"] == 790
    assert merged["TRAWL_GUARD_PRIVATE_TARGETS"] is False  # scheduled work (no requester) crawls admins' sources


def test_one_crawls_settings_do_not_leak_into_the_next():
    layered(version={"CONCURRENT_REQUESTS": 1, "EXTENSIONS": {"custom.Ext": 100}})

    merged = layered(name="other")

    assert merged["CONCURRENT_REQUESTS"] == 16
    assert "custom.Ext" not in merged["EXTENSIONS"]


THROTTLE = "throttling.middlewares.ThrottleMiddleware"
GUARD = "runtime.guard.guard.PrivateTargetGuard"
FILE_HANDLER = "scrapy.core.downloader.handlers.file.FileDownloadHandler"
FTP_HANDLER = "scrapy.core.downloader.handlers.ftp.FTPDownloadHandler"


def test_no_version_or_scraper_disables_or_reorders_trawls_components():
    merged = layered(
        scraper={"EXTENSIONS": {"runtime.watch.watchdogs.StallWatchdog": None}},
        version={
            "DOWNLOADER_MIDDLEWARES": {THROTTLE: None, GUARD: 10, "runtime.watch.blocks.BlockDetector": None},
            "EXTENSIONS": '{"runtime.watch.watchdogs.ErrorRateWatchdog": null}',  # Scrapy takes JSON text there too
        },
    )

    assert merged["DOWNLOADER_MIDDLEWARES"][THROTTLE] == 800
    assert merged["DOWNLOADER_MIDDLEWARES"][GUARD] == 790
    assert merged["DOWNLOADER_MIDDLEWARES"]["runtime.watch.blocks.BlockDetector"] == 880
    assert merged["EXTENSIONS"]["runtime.watch.watchdogs.StallWatchdog"] == 0
    assert merged["EXTENSIONS"]["runtime.watch.watchdogs.ErrorRateWatchdog"] == 0
    assert merged["TRAWL_COMPONENTS"]["DOWNLOADER_MIDDLEWARES"][THROTTLE] == 800  # what the crawler pins


def test_only_http_and_https_have_download_handlers_whatever_a_version_declares():
    merged = layered(
        version={
            "DOWNLOAD_HANDLERS": {"file": FILE_HANDLER, "gopher": "x.Gopher", "http": "x.Http"},
            "DOWNLOAD_HANDLERS_BASE": {"s3": "x.S3"},
            "AUTOTHROTTLE_ENABLED": True,
        }
    )

    handlers = merged["DOWNLOAD_HANDLERS"]
    assert {scheme: path for scheme, path in handlers.items() if path} == {
        "http": "runtime.rendering.dispatch.RenderOnDemandDownloadHandler",
        "https": "runtime.rendering.dispatch.RenderOnDemandDownloadHandler",
    }
    assert {"file", "gopher", "s3", "ftp", "data"} <= set(handlers)  # named, with no handler
    assert "DOWNLOAD_HANDLERS_BASE" not in merged
    assert merged["TRAWL_ALLOWED_SCHEMES"] == ["http", "https"]
    assert merged["AUTOTHROTTLE_ENABLED"] is False


def test_an_admin_opts_a_version_in_to_another_scheme_explicitly():
    merged = layered(scraper={"TRAWL_ALLOWED_SCHEMES": ["FTP", "not a scheme"]})

    assert merged["TRAWL_ALLOWED_SCHEMES"] == ["http", "https", "ftp"]
    assert merged["DOWNLOAD_HANDLERS"]["ftp"] == FTP_HANDLER  # Scrapy's own, since the version names none
    assert merged["DOWNLOAD_HANDLERS"]["file"] is None

    merged = layered(name="files", version={"TRAWL_ALLOWED_SCHEMES": "file", "DOWNLOAD_HANDLERS": {"file": "x.Own"}})
    assert merged["DOWNLOAD_HANDLERS"]["file"] == "x.Own"


def test_job_options_never_reach_the_schemes():
    merged = layered(options={"TRAWL_ALLOWED_SCHEMES": ["file"], "config": {"TRAWL_ALLOWED_SCHEMES": ["file"]}})

    assert merged["TRAWL_ALLOWED_SCHEMES"] == ["http", "https"]
    assert merged["DOWNLOAD_HANDLERS"]["file"] is None


def test_rendering_is_asked_per_request_unless_a_scraper_version_or_job_says_otherwise():
    assert layered()["TRAWL_RENDER"] == "request"
    assert layered(name="a", version={"TRAWL_RENDER": "always"})["TRAWL_RENDER"] == "always"
    by_job = layered(name="b", options={"render": True, "wait_for": ".product", "render_timeout": 500})
    assert (by_job["TRAWL_RENDER"], by_job["TRAWL_RENDER_WAIT_FOR"]) == ("always", ".product")
    assert by_job["TRAWL_RENDER_TIMEOUT"] == 60.0  # bounded by TRAWL_RENDER_TIMEOUT_MAX
    assert layered(name="c", version={"TRAWL_RENDER": "always"}, options={"render": False})["TRAWL_RENDER"] == "never"
    # The worker's browser is shared by its crawls: a version cannot size it.
    assert layered(name="d", version={"TRAWL_RENDER_MAX_PAGES": 500})["TRAWL_RENDER_MAX_PAGES"] == 4
