"""Attack: a scraper version whose spider's `custom_settings` (the common Scrapy idiom) — or whose own settings —
replace DOWNLOADER_MIDDLEWARES, EXTENSIONS, ITEM_PIPELINES, the *_BASE dicts and DOWNLOAD_HANDLERS, switch the
telnet console and AutoThrottle on, turn the guard off and let `file` through. An admin registers them; an ordinary
requester routes a job to each, through a real worker, under the settings `make run` ships and the production
settings. Trawl's pins hold: the crawl still takes throttle tokens, still counts blocks, still refuses `file://`,
the guard still refuses the private site in production, no telnet console opens, no feed file is written, and the
job ends with Trawl's outcome.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.hostile import STRIPPING_SETTINGS, VERSION_STRIPPING_SETTINGS
from tests.security.conftest import ATTACKER_HOST
from tests.security.hostile_site import (
    HostileSite,
    exposed,
    page,
    submit,
    wait_final,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("mode_web_settings"),
]

MARKER = "TRAWL-WORKER-FILE-91aa"
FEED_FILE = Path(next(iter(STRIPPING_SETTINGS["FEEDS"])).removeprefix("file://") % {"name": "settings_stripping"})
# What Scrapy logs when each of these runs; the job's log is where a requester (and we) can see it.
TRAWL_COMPONENTS = (
    "runtime.guard.schemes.SchemeGate",
    "throttling.middlewares.ThrottleMiddleware",
    "runtime.watch.blocks.BlockDetector",
    "runtime.watch.watchdogs.StallWatchdog",
    "runtime.watch.watchdogs.ErrorRateWatchdog",
    "runtime.bridge.handoff.ItemHandoff",
)


def register(admin_api, name: str, spider: str, settings: dict) -> None:
    scraper = admin_api.post("/api/scrapers/", {"name": name, "description": "hostile"}, format="json")
    assert scraper.status_code == 201, scraper.content
    version = {"version": "1.0.0", "variant": "stable", "spider": spider, "is_default": True, "settings": settings}
    response = admin_api.post(f"/api/scrapers/{name}/versions/", version, format="json")
    assert response.status_code == 201, response.content


def test_a_spider_or_version_that_strips_trawls_settings_still_crawls_under_them(
    api, admin_api, builtins, site, mode, mode_worker, tmp_path
):
    # A max_error_rate monitor turns the error-rate watchdog on, so the log's "Enabled extensions" shows it survived
    # (off by design, it says nothing: no WARNING in every job).
    watched = {"TRAWL_MONITORS": {"max_error_rate": 0.99}}
    register(admin_api, "stripping_spider", "tests.fixtures.hostile.SettingsStrippingSpider", watched)
    stripping = {**VERSION_STRIPPING_SETTINGS, **watched}
    register(admin_api, "stripping_version", "runtime.spiders.link.LinkSpider", stripping)
    secret = tmp_path / "secret.html"
    secret.write_text(f"<html><title>{MARKER}</title></html>")
    FEED_FILE.unlink(missing_ok=True)
    private = f"{site.url}/product-3.html"  # 127.0.0.1: the private network the production guard protects
    before = site.hits["/product-3.html"]
    links = (f"file://{ATTACKER_HOST}{secret}", private, "/next.html")
    routes = {"/page.html": (200, {}, page(*links)), "/next.html": (200, {}, page(title="Next"))}
    options = {"maxdepth": 1, "allowed_domains": [ATTACKER_HOST, "127.0.0.1"]}
    with HostileSite(routes) as attacker:
        ids = {
            name: submit(api, url=f"{attacker.url}/page.html", scraper=name, options=options)
            for name in ("stripping_spider", "stripping_version")
        }
        jobs = {name: wait_final(job_id, mode_worker) for name, job_id in ids.items()}

    for name, job in jobs.items():
        stats = job.stats
        assert job.status == "succeeded", (name, job.error_class, job.error_message)
        assert job.version.scraper.name == name
        assert stats["throttle"]["requests"] >= 2, (name, stats)  # every request took a throttle token
        assert stats["blocks"]["checked"] >= 2, (name, stats)  # the block detector saw every response
        assert stats["refused_scheme"] >= 1, (name, stats)  # its file handler and TRAWL_ALLOWED_SCHEMES did nothing
        assert stats["items_new"] >= 2, (name, stats)  # the item handoff it disabled still delivers
        seen = exposed(api, str(job.pk))
        assert MARKER not in seen, f"{name}: the worker's file reached the requester ({mode})"
        log = api.get(f"/api/jobs/{job.pk}/log/").content.decode()
        missing = [component for component in TRAWL_COMPONENTS if component not in log]
        assert not missing, f"{name}: not enabled: {missing}"
        assert "Telnet console listening" not in log and "AutoThrottle" not in log, name
        if mode == "production":
            assert stats["refused_private"] >= 1, (name, stats)
            assert "runtime.guard.guard.PrivateTargetGuard" in log, name
        print(
            f"\n[{mode}] {name}: {stats['pages']} pages, throttle {stats['throttle']}, refused_scheme "
            f"{stats['refused_scheme']}, refused_private {stats['refused_private']}"
        )
    if mode == "production":
        assert site.hits["/product-3.html"] == before, "a private page was fetched"
    assert not FEED_FILE.exists(), "a spider's FEEDS wrote a file on the worker"


# --- the same spider, uploaded as a package: its crawl runs in a child process of the package's environment ---------

PACKAGED_SPIDER = """
import scrapy
from scrapy.http import TextResponse


class StrippingSpider(scrapy.Spider):
    name = "packaged_stripping"
    custom_settings = {settings!r}

    def __init__(self, url=None, **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [url]

    def parse(self, response):
        text = isinstance(response, TextResponse)
        yield {{"url": response.url, "title": response.css("title::text").get() if text else response.text[:200]}}
        if text and response.meta.get("depth", 0) < 1:
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, self.parse)
"""


@pytest.fixture
def package_dirs(tmp_path) -> dict[str, Path]:
    # Wheels go to the package storage (the test database by default), which the worker shares.
    return {name: tmp_path / name for name in ("envs", "wheelhouse", "src")}


@pytest.fixture
def package_mode_worker(mode, mode_web_settings, package_dirs, django_db_setup, redis_server, tmp_path):
    """A real worker of `mode` that builds and runs packaged versions from local directories (no index)."""
    from tests.callbacks.harness import running_alone
    from tests.security.conftest import MODES
    from tests.workers import Worker

    env = {
        **MODES[mode],
        "TRAWL_PACKAGE_CACHE_DIR": str(package_dirs["envs"]),
        "TRAWL_PACKAGE_FIND_LINKS": str(package_dirs["wheelhouse"]),
        "TRAWL_PACKAGE_NO_INDEX": "1",
        # This machine's Redis has no password, which the production settings refuse to start a child with
        # (tests/security/test_packaged_redis.py): allowed here, knowingly, to test everything else.
        "TRAWL_PACKAGE_REDIS_NOPASS_ALLOWED": "1",
    }
    with running_alone(Worker(env=env, log_dir=tmp_path)) as worker:
        yield worker


def test_a_packaged_spider_that_strips_trawls_settings_still_crawls_under_them(
    api, admin_api, builtins, site, mode, package_dirs, package_mode_worker, tmp_path
):
    import io

    from tests.packages import wheel_build
    from tests.security.hostile_site import wait_for_build

    source = PACKAGED_SPIDER.format(settings=STRIPPING_SETTINGS)
    files = {"hostilepkg/__init__.py": "", "hostilepkg/spiders.py": source}
    wheel = wheel_build(package_dirs["src"], name="hostilepkg", version="1.0.0", files=files, requires=["scrapy>=2.11"])
    assert admin_api.post("/api/scrapers/", {"name": "packaged_stripping"}, format="json").status_code == 201
    handle = io.BytesIO(wheel.read_bytes())
    handle.name = wheel.name
    body = {"version": "1.0.0", "variant": "stable", "spider": "hostilepkg.spiders.StrippingSpider", "package": handle}
    response = admin_api.post(
        "/api/scrapers/packaged_stripping/versions/", {**body, "is_default": "true"}, format="multipart"
    )
    assert response.status_code == 201, response.content
    wait_for_build(admin_api, "/api/scrapers/packaged_stripping/versions/1.0.0/", package_mode_worker)
    secret = tmp_path / "secret.html"
    secret.write_text(f"<html><title>{MARKER}</title></html>")
    feed = Path(str(FEED_FILE).replace("settings_stripping", "packaged_stripping"))
    feed.unlink(missing_ok=True)
    before = site.hits["/product-4.html"]
    links = (f"file://{ATTACKER_HOST}{secret}", f"{site.url}/product-4.html", "/next.html")
    routes = {"/page.html": (200, {}, page(*links)), "/next.html": (200, {}, page(title="Next"))}
    with HostileSite(routes) as attacker:
        job = wait_final(
            submit(api, url=f"{attacker.url}/page.html", scraper="packaged_stripping"), package_mode_worker
        )

    stats = job.stats
    assert job.status == "succeeded", (job.error_class, job.error_message)
    assert stats["throttle"]["requests"] >= 2 and stats["blocks"]["checked"] >= 2, stats
    assert stats["refused_scheme"] >= 1 and stats["items_new"] >= 2, stats
    assert MARKER not in exposed(api, str(job.pk)), f"the worker's file reached the requester ({mode})"
    log = api.get(f"/api/jobs/{job.pk}/log/").content.decode()
    assert "Telnet console listening" not in log and "AutoThrottle" not in log
    if mode == "production":
        assert stats["refused_private"] >= 1, stats
        assert site.hits["/product-4.html"] == before, "a private page was fetched"
    assert not feed.exists(), "a packaged spider's FEEDS wrote a file on the worker"
    print(
        f"\n[{mode}] packaged: throttle {stats['throttle']}, refused_scheme {stats['refused_scheme']}, "
        f"refused_private {stats['refused_private']}"
    )
