import json

import pytest
from django.core.management import CommandError, call_command

from registry.models import Scraper, ScraperVersion

LINK_SPIDER = "runtime.spiders.link.LinkSpider"


def test_register_version_creates_scraper_and_prints_it(db, capsys):
    call_command(
        "register_version",
        "shop",
        "1.2.0",
        LINK_SPIDER,
        "--default",
        "--traffic",
        "20",
        "--scrapy-settings",
        '{"DOWNLOAD_DELAY": 1}',
    )

    printed = json.loads(capsys.readouterr().out)
    version = ScraperVersion.objects.get(scraper__name="shop", version="1.2.0")
    assert printed["version"] == "1.2.0"
    assert (version.is_default, version.traffic_pct, version.settings) == (True, 20, {"DOWNLOAD_DELAY": 1})


def test_register_version_refuses_bad_input_and_creates_nothing(db):
    with pytest.raises(CommandError) as refused:
        call_command("register_version", "shop", "1.2", "no.such.Spider")

    assert "version:" in str(refused.value) and "spider:" in str(refused.value)
    assert not Scraper.objects.filter(name="shop").exists()


def test_new_default_replaces_the_old_one(db):
    call_command("register_version", "shop", "1.0.0", LINK_SPIDER, "--default")
    call_command("register_version", "shop", "1.1.0", LINK_SPIDER, "--default")

    defaults = ScraperVersion.objects.filter(scraper__name="shop", is_default=True)
    assert [v.version for v in defaults] == ["1.1.0"]


def test_register_version_obeys_the_traffic_limit_like_the_api(db):
    call_command("register_version", "shop", "1.0.0", LINK_SPIDER, "--default", "--traffic", "90")

    with pytest.raises(CommandError, match="110%"):
        call_command("register_version", "shop", "1.1.0", LINK_SPIDER, "--variant", "canary", "--traffic", "20")

    assert list(ScraperVersion.objects.filter(scraper__name="shop").values_list("version", flat=True)) == ["1.0.0"]


def test_register_version_refuses_a_duplicate_and_a_non_spider(db):
    call_command("register_version", "shop", "1.0.0", LINK_SPIDER)

    with pytest.raises(CommandError, match=r"already has a version '1\.0\.0'"):
        call_command("register_version", "shop", "1.0.0", LINK_SPIDER)
    with pytest.raises(CommandError, match=r"not a scrapy\.Spider subclass"):
        call_command("register_version", "shop", "1.1.0", "registry.semver.semver_key")


def test_register_version_refuses_settings_that_are_not_an_object(db):
    with pytest.raises(CommandError, match="JSON object"):
        call_command("register_version", "shop", "1.0.0", LINK_SPIDER, "--scrapy-settings", "[1, 2]")
