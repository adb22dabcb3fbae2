"""A package's children work in a directory of that package's, never Trawl's own: what a project writes where it
stands (Scrapy's `.scrapy/httpcache`, a pipeline's `items.jl`) stays with the project, as in scrapyd's directory,
is not written into the installation nor read by another project's crawl, and goes when the environment is pruned.
Real children of real package environments; their working directory read from /proc."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from crawls.services.crawl_spec import package_spec_of
from project.env import BASE_DIR
from registry.packages.envs import env_of, envs_prune
from runtime.packaged.children import child_discard, child_for
from runtime.settings.compose import child_pool
from tests.registry.test_package_envs import package_dirs, packaged  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


def cwd_of(child) -> Path:
    return Path(os.readlink(f"/proc/{child.process.pid}/cwd"))


def test_a_packages_children_work_in_its_own_directory_which_goes_with_its_environment(tmp_path, redis_server):
    shop = packaged(tmp_path, dep="1.0")
    other = packaged(tmp_path, dep="2.0", scraper="other")  # another project's own environment
    assert shop.package.sha256 != other.package.sha256

    first = child_for(package_spec_of(shop.package), pool=child_pool())
    second = child_for(package_spec_of(shop.package), pool=child_pool())  # the first is taken: another child
    elsewhere = child_for(package_spec_of(other.package), pool=child_pool())
    try:
        shop_dir, others_dir = cwd_of(first), cwd_of(elsewhere)
        assert cwd_of(second) == shop_dir, "one package's children share its directory"
        assert shop_dir != others_dir, "another package's children never see it"
        for directory in (shop_dir, others_dir):
            assert directory != BASE_DIR and BASE_DIR not in directory.parents, directory
            assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
        assert shop_dir.parent == env_of(shop.package.sha256).root
        (shop_dir / ".scrapy" / "httpcache").mkdir(parents=True)  # as Scrapy's cache would, where the child stands
    finally:
        for child in (first, second, elsewhere):
            child_discard(child)
    assert (shop_dir / ".scrapy" / "httpcache").is_dir(), "it outlives the child, as in scrapyd's directory"

    assert envs_prune(unused=set, only=shop.package.sha256) == [shop.package.sha256]  # its children are gone
    assert not shop_dir.exists(), "pruning the environment removes it"
    assert others_dir.exists()


def test_a_projects_code_finds_its_settings_and_data_directory_where_its_child_stands(tmp_path, monkeypatch):
    """What project_environment sets up, read back through Scrapy's own functions: get_project_settings() gives the
    project's values, and the project data directory (HTTPCACHE_ENABLED's cache) is where the child stands."""
    from scrapy.utils.project import data_path, get_project_settings

    from runtime.packaged.project_spiders import project_environment

    (tmp_path / "src" / "tidy").mkdir(parents=True)
    (tmp_path / "src" / "tidy" / "__init__.py").write_text("")
    (tmp_path / "src" / "tidy" / "settings.py").write_text("BOT_NAME = 'tidy'\nMONGO_URI = 'mongodb://db/tidy'\n")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    monkeypatch.chdir(work)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)

    project_environment("tidy.settings")
    settings = get_project_settings()
    assert (settings.get("BOT_NAME"), settings.get("MONGO_URI")) == ("tidy", "mongodb://db/tidy")
    assert Path(data_path("httpcache")).resolve() == (work / ".scrapy" / "httpcache").resolve()
    project_environment("tidy.settings")  # the package's next crawl: the same file, kept
    assert (work / "scrapy.cfg").read_text() == "[settings]\ndefault = tidy.settings\n"
    assert [path.name for path in work.iterdir() if path.name.startswith("scrapy.cfg.")] == []

    project_environment("")
    assert "SCRAPY_SETTINGS_MODULE" not in os.environ
    project_environment("tidy.settings\n[datadir]\ndefault = /")  # a version's field, not a module's name
    assert "SCRAPY_SETTINGS_MODULE" not in os.environ
    assert (work / "scrapy.cfg").read_text() == "[settings]\ndefault = tidy.settings\n"
