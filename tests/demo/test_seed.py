"""`manage.py seed_demo`: everything the demo needs, idempotent, with credentials a launcher can show."""

from __future__ import annotations

import io
import json
import stat

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from access.models import ApiToken, Requester
from access.services import token_authenticate
from crawls.models import CrawlJob
from registry.models import Scraper, ScraperVersion
from registry.services import version_route
from sources.models import Source
from sources.services.sources import sources_dispatch_due

BASE = "http://127.0.0.1:8001"
MODELS = (Scraper, ScraperVersion, Source, Requester, ApiToken, get_user_model())


@pytest.fixture
def seed(db, tmp_path, monkeypatch):
    monkeypatch.delenv("TRAWL_ADMIN_PASSWORD", raising=False)
    credentials = tmp_path / "var" / "demo-credentials.json"

    def run(*args: str) -> dict:
        out = io.StringIO()
        call_command("seed_demo", "--base-url", BASE, "--credentials", str(credentials), *args, stdout=out)
        lines = out.getvalue().splitlines()
        assert len(lines) == 1, lines
        return json.loads(lines[0])

    run.credentials = credentials
    return run


def counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in MODELS}


def test_seed_prints_working_credentials(seed):
    printed = seed()

    assert set(printed) == {"admin_user", "admin_password", "api_token", "requester"}
    assert authenticate(username=printed["admin_user"], password=printed["admin_password"]).is_superuser
    requester = token_authenticate(token=printed["api_token"])
    assert (requester.name, requester.is_admin) == (printed["requester"], True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {printed['api_token']}")
    assert client.get("/api/jobs/").status_code == 200
    assert stat.S_IMODE(seed.credentials.stat().st_mode) == 0o600


def test_seed_twice_changes_nothing(seed):
    first, before = seed(), counts()
    stored = seed.credentials.read_text()

    second = seed()

    assert second == first
    assert counts() == before
    assert seed.credentials.read_text() == stored
    assert token_authenticate(token=second["api_token"]) is not None


def test_seed_creates_stable_and_canary_demo_shop_versions(seed):
    seed()

    versions = {v.version: v for v in ScraperVersion.objects.filter(scraper__name="demo_shop")}
    assert set(versions) == {"1.0.0", "1.1.0"}
    stable, canary = versions["1.0.0"], versions["1.1.0"]
    assert (stable.variant, stable.is_default, stable.traffic_pct) == ("stable", True, 90)
    assert (canary.variant, canary.traffic_pct, canary.settings) == ("canary", 10, {"DEMO_SHOP_EXTRACT_STOCK": True})
    assert stable.spider == canary.spider == "demo.spiders.DemoShopSpider"
    assert version_route(scraper=stable.scraper, variant="canary") == canary
    assert Scraper.objects.filter(name__in=["link", "selectors"]).count() == 2


def test_seeded_sources_are_due_now_and_dispatched(seed):
    seed()

    sources = {source.kind: source for source in Source.objects.select_related("scraper")}
    assert {kind: (s.scraper.name, s.url) for kind, s in sources.items()} == {
        "hub": ("demo_shop", f"{BASE}/index.html"),
        "list": ("selectors", f"{BASE}/category/kitchen/page-1.html"),
        "product": ("selectors", f"{BASE}/product/KIT-1001.html"),
        "sitemap": ("sitemap", f"{BASE}/sitemap.xml"),
    }
    assert sources["hub"].strategy == "discovery"
    assert sources["list"].config["next_page"] == "a.next"
    assert all(s.next_sync_at <= timezone.now() and s.current_interval == 300 for s in sources.values())
    assert sources_dispatch_due() == 4
    assert {job.source.kind for job in CrawlJob.objects.all()} == {"hub", "list", "product", "sitemap"}


def test_a_token_that_stopped_working_is_replaced(seed):
    old = seed()["api_token"]
    ApiToken.objects.update(revoked_at=timezone.now())

    new = seed()["api_token"]

    assert new != old
    assert token_authenticate(token=new).name == "demo"
    assert json.loads(seed.credentials.read_text())["api_token"] == new


def test_admin_password_from_the_environment_wins_and_is_not_stored(seed, monkeypatch):
    seed()
    monkeypatch.setenv("TRAWL_ADMIN_PASSWORD", "correct-horse-battery")

    printed = seed()

    assert printed["admin_password"] == "correct-horse-battery"
    assert authenticate(username="admin", password="correct-horse-battery") is not None
    assert "correct-horse-battery" not in seed.credentials.read_text()


def test_seed_adds_a_throttle_rule_for_the_demo_host_once(seed):
    from throttling.models import DomainThrottle

    seed()
    seed()

    (rule,) = DomainThrottle.objects.all()
    assert (rule.domain, rule.rate, rule.burst, rule.blocked) == ("127.0.0.1", 20, 20, False)
