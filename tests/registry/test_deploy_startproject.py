"""`manage.py deploy` of a `scrapy startproject` layout: the setup written into the build copy only, the project's
name, and the version chosen when none is asked (an unused one)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from project.errors import TrawlError
from registry.deploy.build import setup_generate, wheel_build
from registry.deploy.deploying import DeployRequest, version_choose
from registry.deploy.project import project_name_of, settings_module_of

STARTPROJECT = {
    "scrapy.cfg": "[settings]\ndefault = myproject.settings\n\n[deploy]\nproject = myproject\n",
    "myproject/__init__.py": "",
    "myproject/settings.py": "BOT_NAME = 'myproject'\nSPIDER_MODULES = ['myproject.spiders']\n",
    "myproject/pipelines.py": "class Tag:\n    def process_item(self, item, spider):\n        return item\n",
    "myproject/spiders/__init__.py": "",
    "myproject/spiders/toscrape-css.py": "import scrapy\n\nclass Css(scrapy.Spider):\n    name = 'toscrape-css'\n",
}


def startproject(root: Path, files: dict[str, str] = STARTPROJECT) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def tree(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def test_a_startproject_layout_builds_with_a_setup_written_in_the_build_copy_only(tmp_path):
    root = startproject(tmp_path / "myproject")
    before = tree(root)

    wheel = wheel_build(root, out=tmp_path / "out")

    assert tree(root) == before, "the user's directory is unchanged"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(archive.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    assert {"myproject/settings.py", "myproject/pipelines.py", "myproject/spiders/toscrape-css.py"} <= names
    assert "settings = myproject.settings" in entry_points


def test_the_generated_setup_finds_a_src_layout_and_refuses_a_project_without_settings(tmp_path):
    src = {name if name == "scrapy.cfg" else f"src/{name}": text for name, text in STARTPROJECT.items()}
    root = startproject(tmp_path / "srcproject", src)
    setup = setup_generate(root).read_text()
    assert "package_dir={'': 'src'}" in setup and "find_packages('src'" in setup
    bare = startproject(tmp_path / "bare", {"shop/__init__.py": ""})
    with pytest.raises(TrawlError, match=r"neither pyproject\.toml nor setup\.py, nor a scrapy\.cfg"):
        setup_generate(bare)


def test_the_project_is_named_by_scrapy_cfg_deploy_else_its_settings_package(tmp_path):
    root = startproject(tmp_path / "dir")
    assert (project_name_of(root), settings_module_of(root)) == ("myproject", "myproject.settings")
    (root / "scrapy.cfg").write_text("[settings]\ndefault = books.settings\n")
    assert project_name_of(root) == "books"
    (root / "scrapy.cfg").unlink()
    assert project_name_of(root) == "dir"


@pytest.mark.parametrize(
    ("asked", "project_version", "existing", "chosen"),
    [
        ({}, "", [], "1.0.0"),  # a startproject layout's first deploy
        ({}, "", ["1.0.0", "1.2.3", "1.1.9"], "1.2.4"),  # the latest's next patch
        ({}, "0.3.0", [], "0.3.0"),  # the project's own version, unused
        ({}, "0.3.0", ["0.3.0"], "0.3.1"),  # used already: the next unused one
        ({}, "0.3", ["0.3.0"], "0.3.1"),  # not semantic: still a version nobody has
        ({"bump": "minor"}, "0.3.0", ["1.4.2"], "1.5.0"),
        ({"version": "2.0.0"}, "0.3.0", ["1.4.2"], "2.0.0"),
    ],
)
def test_without_version_or_bump_an_unused_version_is_chosen(asked, project_version, existing, chosen):
    request = DeployRequest(directory=Path("."), **asked)
    assert version_choose(request, project_version, existing) == chosen


def test_a_stable_deploy_goes_live_unless_a_canary_or_a_traffic_share_is_asked():
    assert DeployRequest(directory=Path(".")).goes_live
    assert not DeployRequest(directory=Path("."), variant="canary").goes_live
    assert not DeployRequest(directory=Path("."), traffic_pct=10).goes_live


@pytest.mark.django_db
def test_going_live_makes_the_version_the_default_and_others_keep_their_traffic(admin_api):
    from registry.deploy.deploying import Deployed, go_live
    from registry.deploy.project import SpiderClass
    from registry.deploy.targets import LocalTarget
    from tests.registry.factories import make_scraper, make_version

    scraper = make_scraper("myproject")
    make_version(scraper, "1.0.0", is_default=True)
    make_version(scraper, "1.1.0", variant="canary", traffic_pct=10)
    make_version(scraper, "1.0.1")
    said: list[str] = []

    deployed = Deployed(
        scraper="myproject", version={"version": "1.0.1"}, spider=SpiderClass("a.B", ""), replaces="1.0.0"
    )
    go_live(target=LocalTarget(), deployed=deployed, say=said.append)

    assert said == ["live: myproject 1.0.1 is the default now, replacing 1.0.0"]
    versions = {v.version: (v.is_default, v.traffic_pct) for v in scraper.versions.all()}
    assert versions == {"1.0.0": (False, 0), "1.1.0": (False, 10), "1.0.1": (True, 0)}
    response = admin_api.post("/api/scrapers/myproject/versions/1.0.0/default/")
    assert response.status_code == 200 and response.json()["is_default"], response.content
