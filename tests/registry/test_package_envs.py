"""Per-machine package environments: built once under a lock with the package's own dependency versions, never
touching Trawl's; pruned only when unused and not held by a running child."""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from registry.models import ScraperVersion
from registry.packages.envs import EnvBuildError, _build_environment, _pip_install, env_lease, env_of, envs_prune
from registry.services.packages import packages_unused, version_upload
from tests.packages import dep_wheels, hostile_source_tree, shop_wheel, wheel_build
from tests.registry.factories import make_scraper

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def package_dirs(settings, tmp_path):
    settings.STORAGES = {
        **settings.STORAGES,
        "packages": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": tmp_path / "s"}},
    }
    settings.TRAWL_PACKAGE_CACHE_DIR = str(tmp_path / "envs")
    settings.TRAWL_PACKAGE_FIND_LINKS = [str(tmp_path / "wheelhouse")]
    settings.TRAWL_PACKAGE_NO_INDEX = True
    dep_wheels(tmp_path / "wheelhouse")
    return tmp_path


def packaged(tmp_path, *, dep: str, scraper: str = "shop", module: str = "trawlshop") -> ScraperVersion:
    """Version 1.0.0 of `scraper`, a packaged shop spider (`<module>.spiders.ShopSpider`) needing
    trawltestdep==`dep` (its own environment per dep)."""
    wheel = shop_wheel(tmp_path / "src" / scraper, version="1.0.0", output="v1", dep=dep, module=module)
    with open(wheel, "rb") as handle:
        return version_upload(
            scraper=make_scraper(scraper),
            package=handle,
            filename=wheel.name,
            version="1.0.0",
            spider=f"{module}.spiders.ShopSpider",
        )


def python_says(python, code: str) -> str:
    done = subprocess.run([str(python), "-P", "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_concurrent_workers_build_one_environment_with_the_package_dependencies(tmp_path, caplog):
    version = packaged(tmp_path, dep="2.0")
    leases = []

    def lease():
        leases.append(env_lease(package=version.package))

    with caplog.at_level(logging.INFO, logger="trawl.packages"):
        threads = [threading.Thread(target=lease) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    assert len({env for env, _ in leases}) == 1
    assert sum("built in" in record.getMessage() for record in caplog.records) == 1
    env = leases[0][0]
    assert python_says(env.python, "import trawltestdep, scrapy; print(trawltestdep.VALUE, scrapy.__version__)") == (
        f"dep-2.0 {__import__('scrapy').__version__}"
    ), "its own dependency, Trawl's Scrapy (not installed twice)"
    assert not (env.site_packages / "scrapy").exists()
    trawl = subprocess.run([sys.executable, "-c", "import trawltestdep"], capture_output=True)
    assert trawl.returncode != 0, "Trawl's own environment is untouched"
    for _, fd in leases:
        os.close(fd)


def test_a_dependency_nowhere_to_be_found_fails_the_build_with_pips_log(tmp_path):
    version = packaged(tmp_path, dep="9.0")

    with pytest.raises(EnvBuildError) as failure:
        env_lease(package=version.package)

    assert "pip install failed" in failure.value.message
    assert "trawltestdep==9.0" in failure.value.log


def test_an_environment_is_pruned_once_deprecated_and_released(tmp_path):
    version = packaged(tmp_path, dep="1.0")
    env, fd = env_lease(package=version.package)
    sha = version.package.sha256

    assert envs_prune(unused=packages_unused) == [], "active: kept"
    ScraperVersion.objects.filter(pk=version.pk).update(deprecated_at=timezone.now())
    assert envs_prune(unused=packages_unused) == [], "deprecated but held by a child: kept"
    assert env.ready()
    os.close(fd)
    assert envs_prune(unused=packages_unused) == [sha]
    assert not env.root.exists()


def test_a_build_does_not_wait_for_crawls_holding_the_environment(tmp_path):
    """A crawl child holds the shared lock for its whole life; a build must not wait for it to end (it used to
    upgrade to an exclusive lock, which waited for every holder: forever when the holder was its own process)."""
    version = packaged(tmp_path, dep="1.0")
    sha = version.package.sha256
    (tmp_path / "envs").mkdir()
    held = os.open(tmp_path / "envs" / f"{sha}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(held, fcntl.LOCK_SH)
    leases = []
    builder = threading.Thread(target=lambda: leases.append(env_lease(package=version.package)), daemon=True)
    try:
        builder.start()
        builder.join(timeout=120)
        assert not builder.is_alive(), "the build waited for the crawl holding the environment's lock"
        env, fd = leases[0]
        assert env.ready()
        os.close(fd)
    finally:
        os.close(held)


def test_venv_and_pip_get_an_allow_listed_environment(monkeypatch):
    """pip installs wheels only, and neither it nor venv sees the worker's secrets."""
    for name in ("SECRET_KEY", "DATABASE_URL", "REDIS_URL", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "secret")
    monkeypatch.setenv("PIP_INDEX_URL", "https://pypi.example/simple")

    environment = _build_environment()

    assert not [name for name, value in environment.items() if value == "secret"]
    assert environment["PIP_INDEX_URL"] == "https://pypi.example/simple" and environment["PATH"] == os.environ["PATH"]
    assert "--only-binary" in _pip_install(env_of("0" * 64), Path("x.whl"))


def uploaded(wheel: Path) -> ScraperVersion:
    with open(wheel, "rb") as handle:
        return version_upload(
            scraper=make_scraper("deep"), package=handle, filename=wheel.name, version="1.0.0", spider="deep.spiders.S"
        )


def test_a_direct_url_requirement_deep_in_the_dependencies_is_refused_before_pip_fetches_it(tmp_path):
    """A wheel of the wheelhouse needs `trawlevil @ file:///<source tree>`: pip, even with --only-binary :all:,
    would run that tree's build backend. The build fails naming it, and the backend never ran."""
    marker = tmp_path / "backend-ran"
    tree = hostile_source_tree(tmp_path / "evilsrc", marker=marker)
    middle = [f"trawlevil @ {tree.as_uri()}"]
    wheel_build(
        tmp_path / "wheelhouse",
        name="trawlmiddle",
        version="1.0",
        files={"trawlmiddle/__init__.py": ""},
        requires=middle,
    )
    files = {"deep/__init__.py": "", "deep/spiders.py": "import scrapy\n\n\nclass S(scrapy.Spider):\n    name = 's'\n"}
    version = uploaded(
        wheel_build(tmp_path / "src", name="deep", version="1.0", files=files, requires=["trawlmiddle==1.0"])
    )

    with pytest.raises(EnvBuildError) as failure:
        env_lease(package=version.package)

    assert "Trawl refuses direct URL requirements: trawlmiddle requires 'trawlevil @ file://" in failure.value.message
    assert not marker.exists(), "the direct URL's build backend ran on the worker"


def test_a_stored_wheel_with_a_direct_url_requirement_is_refused_before_pip_runs(tmp_path):
    """Stored before uploads were checked for them: the build checks the wheel's own METADATA again."""
    marker = tmp_path / "backend-ran"
    tree = hostile_source_tree(tmp_path / "evilsrc", marker=marker)
    version = packaged(tmp_path, dep="1.0")
    files = {"trawlshop/__init__.py": "", "trawlshop/spiders.py": ""}
    forged = wheel_build(
        tmp_path / "forged", name="trawlshop", version="1.0.0", files=files, requires=[f"x @ {tree.as_uri()}"]
    )
    storage_path = Path(settings.STORAGES["packages"]["OPTIONS"]["location"]) / version.package.path
    storage_path.write_bytes(forged.read_bytes())
    # Uploaded as it is (its SHA-256 recorded then), only never checked for direct URLs.
    type(version.package).objects.filter(pk=version.package.pk).update(
        sha256=hashlib.sha256(forged.read_bytes()).hexdigest()
    )
    version.package.refresh_from_db()

    with pytest.raises(EnvBuildError, match=r"the wheel is refused: .* is a direct URL reference"):
        env_lease(package=version.package)
    assert not marker.exists()
