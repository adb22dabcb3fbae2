"""A packaged project named like one of Trawl's apps (`scrapy startproject demo`, `sources`, `scrapyd` ...) loads its
own package in its child, not Trawl's app of that name: real package environments, real children."""

from __future__ import annotations

import pytest

from crawls.services.crawl_spec import package_spec_of
from runtime.packaged.children import package_check
from runtime.packaged.project_names import CHILD_PACKAGES
from runtime.settings.compose import child_pool
from tests.registry.test_package_envs import package_dirs, packaged  # noqa: F401 (fixture)
from tests.runtime.test_packaged import crawl_product_page
from tests.test_layers import LAYERS

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("name", ["demo", "sources", "crawls"])
def test_a_project_named_like_one_of_trawls_apps_loads_its_own_package(tmp_path, redis_server, name):
    version = packaged(tmp_path, dep="1.0", scraper=f"named-{name}", module=name)

    error, spiders = package_check(
        package=package_spec_of(version.package), spider=f"{name}.spiders.ShopSpider", pool=child_pool()
    )

    assert error == ""
    assert spiders == {"packaged_shop": f"{name}.spiders.ShopSpider"}


def test_a_project_named_crawls_crawls_with_trawls_components(tmp_path, site, redis_server):
    """Not only imported: a crawl of it in its child, Trawl's throttle taking its tokens there."""
    version = packaged(tmp_path, dep="1.0", scraper="named-crawls", module="crawls")

    crawl, _ = crawl_product_page(version, site, {"LOG_LEVEL": "ERROR"}, spider="crawls.spiders.ShopSpider")

    assert (crawl.finish_reason, crawl.stats.get("item_scraped_count"), crawl.crawl_error) == ("finished", 1, ""), crawl
    assert crawl.stats.get("throttle/requests") and "throttle/redis_errors" not in crawl.stats, crawl.stats


def test_the_names_a_child_keeps_for_trawl_are_runtime_and_the_apps_beneath_it():
    """What the layer test lets runtime import: any other app's name may be a project's."""
    runtime_rung = next(rung for rung, apps in enumerate(LAYERS) if "runtime" in apps)
    beneath = {app for apps in LAYERS[: runtime_rung + 1] for app in apps}
    assert beneath == CHILD_PACKAGES
