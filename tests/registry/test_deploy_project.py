"""How `manage.py deploy` reads a Scrapy project without importing it: which spider, and what it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from project.errors import TrawlError
from registry.deploy.build import wheel_build
from registry.deploy.project import spider_pick


def project(root: Path, files: dict[str, str]) -> Path:
    for name, text in {"pyproject.toml": "[project]\nname = 'p'\nversion = '1.0.0'\n", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_only_spider_subclass_is_picked_with_its_start_url_whatever_its_base(tmp_path):
    root = project(tmp_path, {
        "shop/__init__.py": "",
        "shop/helpers.py": "class Helper:\n    pass\n",
        "shop/spiders/__init__.py": "",
        "shop/spiders/deals.py": (
            "from scrapy.spiders import CrawlSpider\n\n"
            "class DealsSpider(CrawlSpider):\n    start_urls = ['https://shop.example/deals']\n"
        ),
    })  # fmt: skip

    picked = spider_pick(root)

    assert (picked.path, picked.start_url) == ("shop.spiders.deals.DealsSpider", "https://shop.example/deals")


def test_scrapy_cfg_spider_modules_narrow_the_search(tmp_path):
    spider = "import scrapy\n\nclass {0}(scrapy.Spider):\n    name = '{0}'\n"
    root = project(tmp_path, {
        "scrapy.cfg": "[settings]\ndefault = shop.settings\n",
        "shop/__init__.py": "",
        "shop/settings.py": "SPIDER_MODULES = ['shop.spiders']\n",
        "shop/spiders/__init__.py": "",
        "shop/spiders/live.py": spider.format("LiveSpider"),
        "shop/attic/old.py": spider.format("OldSpider"),  # not in SPIDER_MODULES: not a candidate
    })  # fmt: skip

    assert spider_pick(root).path == "shop.spiders.live.LiveSpider"


def test_spiders_are_picked_by_name_and_the_first_by_name_is_the_default(tmp_path):
    spider = "import scrapy\n\nclass {0}(scrapy.Spider):\n    name = '{1}'\n    start_urls = ['https://{1}.example/']\n"
    root = project(tmp_path, {
        "scrapy.cfg": "[settings]\ndefault = shop.settings\n",
        "shop/__init__.py": "",
        "shop/settings.py": "SPIDER_MODULES = ['shop.spiders']\n",
        "shop/spiders/__init__.py": "",
        "shop/spiders/toscrape-css.py": spider.format("CssSpider", "toscrape-css"),
        "shop/spiders/books.py": spider.format("BooksSpider", "books"),
    })  # fmt: skip

    assert spider_pick(root).path == "shop.spiders.books.BooksSpider"
    css = spider_pick(root, spider="toscrape-css")
    assert (css.path, css.name, css.start_url) == (
        "shop.spiders.toscrape-css.CssSpider",
        "toscrape-css",
        "https://toscrape-css.example/",
    )
    with pytest.raises(TrawlError, match=r"no spider named 'nope' \(it has: books, toscrape-css\)"):
        spider_pick(root, spider="nope")


def test_a_subclass_of_a_local_spider_makes_two(tmp_path):
    root = project(tmp_path, {
        "shop/__init__.py": "",
        "shop/spiders.py": "import scrapy\n\nclass Base(scrapy.Spider):\n    pass\n\nclass Shop(Base):\n    pass\n",
    })  # fmt: skip

    with pytest.raises(TrawlError, match=r"2 spiders \(shop.spiders.Base, shop.spiders.Shop\): choose one"):
        spider_pick(root)
    assert spider_pick(root, spider="shop.spiders.Shop").path == "shop.spiders.Shop"


def test_no_spider_no_build_file_and_a_syntax_error_are_refused_by_name(tmp_path):
    with pytest.raises(TrawlError, match=r"no scrapy\.Spider subclass found .*--spider"):
        spider_pick(project(tmp_path / "empty", {"shop/__init__.py": ""}))
    with pytest.raises(TrawlError, match=r"shop/spiders\.py: invalid syntax"):
        spider_pick(project(tmp_path / "broken", {"shop/spiders.py": "class (:\n"}))
    bare = tmp_path / "bare"
    bare.mkdir()
    with pytest.raises(TrawlError, match=r"neither pyproject\.toml nor setup\.py"):
        wheel_build(bare, out=tmp_path / "out")


def test_a_src_layout_names_modules_from_inside_src(tmp_path):
    root = project(tmp_path, {
        "scrapy.cfg": "[settings]\ndefault = shop.settings\n",
        "src/shop/__init__.py": "",
        "src/shop/settings.py": "SPIDER_MODULES = ['shop.spiders']\n",
        "src/shop/spiders.py": "import scrapy\n\nclass ShopSpider(scrapy.Spider):\n    name = 'shop'\n",
    })  # fmt: skip

    assert spider_pick(root).path == "shop.spiders.ShopSpider"
