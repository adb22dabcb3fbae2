"""Uploading a wheel as a scraper version: what is checked before anything is written, and what is stored."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile

import pytest
from django.conf import settings
from django.core.files.storage import storages
from django.core.management import CommandError, call_command

from registry.models import Package, PackageStatus, Scraper, ScraperVersion
from registry.services import version_route
from registry.services.packages import packages_unused
from tests.clients import client_for
from tests.packages import shop_wheel, wheel_build
from tests.registry.factories import make_job, make_version

pytestmark = pytest.mark.django_db
SPIDER = "trawlshop.spiders.ShopSpider"


@pytest.fixture(autouse=True)
def package_dirs(settings, tmp_path):
    settings.STORAGES = {
        **settings.STORAGES,
        "packages": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": tmp_path / "s"}},
    }
    settings.TRAWL_PACKAGE_CACHE_DIR = str(tmp_path / "envs")
    return tmp_path / "s"


@pytest.fixture
def ops(db):
    client = client_for("ops", admin=True)
    assert client.post("/api/scrapers/", {"name": "shop"}, format="json").status_code == 201
    return client


def upload(client, wheel_bytes: bytes, filename: str, **fields):
    body = {"version": "1.0.0", "variant": "stable", "spider": SPIDER, **fields}
    body["package"] = _file(wheel_bytes, filename)
    return client.post("/api/scrapers/shop/versions/", body, format="multipart")


def _file(data: bytes, name: str):
    handle = io.BytesIO(data)
    handle.name = name
    return handle


def nothing_written(package_dirs):
    assert not ScraperVersion.objects.filter(scraper__name="shop").exists()
    assert not Package.objects.exists()
    assert not package_dirs.exists() or not any(package_dirs.rglob("*.whl"))


def test_a_wheel_becomes_a_building_version_stored_once_by_hash(ops, tmp_path, package_dirs):
    wheel = shop_wheel(tmp_path / "src", version="1.0.0", output="v1", dep="1.0")
    settings_json = json.dumps({"DOWNLOAD_DELAY": 0})

    first = upload(ops, wheel.read_bytes(), wheel.name, traffic_pct="30", is_default="true", settings=settings_json)
    second = upload(ops, wheel.read_bytes(), wheel.name, version="1.0.1")

    assert first.status_code == 201, first.content
    body = first.json()
    assert (body["package_status"], body["spider"], body["traffic_pct"], body["is_default"]) == (
        "building",
        SPIDER,
        30,
        True,
    )
    assert body["settings"] == {"DOWNLOAD_DELAY": 0}
    assert body["package"]["name"] == "trawlshop"
    assert body["package"]["requires"] == ["scrapy>=2.11", "trawltestdep==1.0"]
    assert second.status_code == 201, second.content
    package = Package.objects.get()  # the same wheel twice: one row, one file
    assert storages["packages"].open(package.path).read() == wheel.read_bytes()
    assert [p.name for p in package_dirs.rglob("*.whl")] == [wheel.name]


def test_a_building_version_never_routes_until_ready(ops, tmp_path):
    wheel = shop_wheel(tmp_path / "src", version="1.0.0", output="v1")
    shop = Scraper.objects.get(name="shop")
    make_version(shop, "0.9.0", is_default=True)
    assert upload(ops, wheel.read_bytes(), wheel.name, traffic_pct="100").status_code == 201

    assert version_route(scraper=shop).version == "0.9.0"
    with pytest.raises(Exception, match="still building"):
        version_route(scraper=shop, version="1.0.0")
    ScraperVersion.objects.filter(scraper__name="shop", version="1.0.0").update(package_status=PackageStatus.READY)
    assert version_route(scraper=shop).version == "1.0.0"
    ScraperVersion.objects.filter(scraper__name="shop", version="1.0.0").update(
        package_status=PackageStatus.FAILED, package_log="no dep\n"
    )
    assert version_route(scraper=shop).version == "0.9.0"
    with pytest.raises(Exception, match="failed to build: no dep"):
        version_route(scraper=shop, version="1.0.0")


@pytest.mark.parametrize(
    ("data", "filename", "says"),
    [
        (b"not a zip at all", "trawlshop-1.0.0-py3-none-any.whl", "not a readable zip"),
        (None, "trawlshop.zip", "not a wheel file name"),
        ("no-metadata", "trawlshop-1.0.0-py3-none-any.whl", "METADATA is missing"),
        ("other-version", "trawlshop-1.0.0-py3-none-any.whl", "does not match its METADATA"),
        ("truncated", "trawlshop-1.0.0-py3-none-any.whl", "not a readable zip"),
    ],
)
def test_a_file_that_is_not_a_wheel_is_a_400_naming_package_and_writes_nothing(
    ops, tmp_path, package_dirs, data, filename, says
):
    good = shop_wheel(tmp_path / "src", version="1.0.0", output="v1").read_bytes()
    if data is None:
        data = good
    elif data == "no-metadata":
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr("trawlshop/spiders.py", "")
            archive.writestr("trawlshop-1.0.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        data = buffer.getvalue()
    elif data == "other-version":
        data = shop_wheel(tmp_path / "other", version="2.0.0", output="v2").read_bytes()
    elif data == "truncated":
        data = good[: len(good) // 2]

    response = upload(ops, data, filename)

    assert response.status_code == 400, response.content
    assert list(response.json()) == ["package"]
    assert says in response.json()["package"][0]
    nothing_written(package_dirs)


def test_a_refused_version_leaves_no_package_behind(ops, tmp_path, package_dirs):
    wheel = shop_wheel(tmp_path / "src", version="1.0.0", output="v1")

    bad_spider = upload(ops, wheel.read_bytes(), wheel.name, spider="trawlshop.missing.ShopSpider")
    bad_version = upload(ops, wheel.read_bytes(), wheel.name, version="one")
    over_traffic = upload(ops, wheel.read_bytes(), wheel.name, traffic_pct="101")
    bad_settings = upload(ops, wheel.read_bytes(), wheel.name, settings="{not json")

    assert bad_spider.status_code == 400 and "trawlshop.missing" in bad_spider.json()["spider"][0]
    assert bad_version.status_code == 400 and "version" in bad_version.json()
    assert over_traffic.status_code == 400 and "traffic_pct" in over_traffic.json()
    assert bad_settings.status_code == 400 and "settings" in bad_settings.json()
    nothing_written(package_dirs)


def test_an_existing_version_number_refuses_the_upload_without_storing_it(ops, tmp_path, package_dirs):
    wheel = shop_wheel(tmp_path / "src", version="1.0.0", output="v1")
    assert upload(ops, wheel.read_bytes(), wheel.name).status_code == 201
    other = shop_wheel(tmp_path / "other", version="2.0.0", output="v2")

    again = upload(ops, other.read_bytes(), other.name)

    assert again.status_code == 400 and "already has a version" in again.json()["version"][0]
    assert Package.objects.count() == 1
    assert [p.name for p in package_dirs.rglob("*.whl")] == [wheel.name]


def test_the_size_limit_is_a_400(ops, tmp_path, settings, package_dirs):
    settings.TRAWL_PACKAGE_MAX_BYTES = 100
    wheel = wheel_build(tmp_path, name="trawlshop", version="1.0.0", files={"trawlshop/spiders.py": "x = 1\n" * 50})

    response = upload(ops, wheel.read_bytes(), wheel.name)

    assert response.status_code == 400 and "100 byte limit" in response.json()["package"][0]
    nothing_written(package_dirs)


def test_only_admins_upload(db, tmp_path):
    client_for("ops", admin=True).post("/api/scrapers/", {"name": "shop"}, format="json")
    wheel = shop_wheel(tmp_path / "src", version="1.0.0", output="v1")

    response = upload(client_for("alice"), wheel.read_bytes(), wheel.name)

    assert response.status_code == 403
    assert not Package.objects.exists()


def test_an_environment_is_unused_once_every_version_is_deprecated_and_nothing_runs(ops, tmp_path):
    wheel = shop_wheel(tmp_path / "src", version="1.0.0", output="v1")
    assert upload(ops, wheel.read_bytes(), wheel.name).status_code == 201
    version = ScraperVersion.objects.get(scraper__name="shop", version="1.0.0")
    sha = version.package.sha256

    assert packages_unused([sha, "f" * 64]) == {"f" * 64}  # a hash no version knows is unused
    ScraperVersion.objects.filter(pk=version.pk).update(deprecated_at="2026-01-01T00:00:00Z")
    job = make_job(version, status="running")
    assert packages_unused([sha]) == set()  # deprecated, but a job still runs it
    job.status = "succeeded"
    job.save()
    assert packages_unused([sha]) == {sha}


def test_a_version_without_a_package_still_needs_an_importable_spider(ops):
    response = ops.post(
        "/api/scrapers/shop/versions/",
        {"version": "1.0.0", "variant": "stable", "spider": "trawlshop.spiders.ShopSpider"},
        format="json",
    )
    assert response.status_code == 400 and "cannot import" in response.json()["spider"][0]


def test_register_version_takes_a_package(ops, tmp_path, capsys):
    wheel = shop_wheel(tmp_path / "src", version="1.0.0", output="v1", dep="1.0")

    call_command("register_version", "shop", "1.0.0", SPIDER, "--package", str(wheel), "--default")

    printed = json.loads(capsys.readouterr().out)
    assert (printed["package_status"], printed["is_default"], printed["spider"]) == ("building", True, SPIDER)
    assert ScraperVersion.objects.get(scraper__name="shop", version="1.0.0").package.filename == wheel.name
    with pytest.raises(CommandError, match="not a readable zip"):
        (tmp_path / "bad-1.0.0-py3-none-any.whl").write_bytes(b"junk")
        call_command(
            "register_version", "shop", "1.1.0", SPIDER, "--package", str(tmp_path / "bad-1.0.0-py3-none-any.whl")
        )
    with pytest.raises(CommandError, match="cannot read"):
        call_command("register_version", "shop", "1.2.0", SPIDER, "--package", str(tmp_path / "missing.whl"))
    assert ScraperVersion.objects.filter(scraper__name="shop").count() == 1


def test_the_admin_uploads_a_package_with_the_same_checks(ops, tmp_path, admin_client, package_dirs):
    shop = Scraper.objects.get(name="shop")
    wheel = shop_wheel(tmp_path / "src", version="1.0.0", output="v1")
    form = {
        "scraper": shop.pk,
        "version": "1.0.0",
        "variant": "stable",
        "spider": SPIDER,
        "traffic_pct": 0,
        "min_priority": 1,
        "settings": "{}",
    }
    add = "/admin/registry/scraperversion/add/"

    refused = admin_client.post(add, {**form, "package_file": _file(b"junk", wheel.name)})
    assert refused.status_code == 200 and "not a readable zip" in refused.content.decode()
    nothing_written(package_dirs)
    saved = admin_client.post(add, {**form, "package_file": _file(wheel.read_bytes(), wheel.name)})

    assert saved.status_code == 302, saved.content.decode()[:2000]
    version = ScraperVersion.objects.get(scraper=shop, version="1.0.0")
    assert (version.package_status, version.package.filename) == ("building", wheel.name)


def test_the_size_limit_is_set_from_the_environment():
    code = "from project import env; print(env.PACKAGE_MAX_BYTES)"
    variables = {**os.environ, "TRAWL_PACKAGE_MAX_BYTES": "1234"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=settings.BASE_DIR, env=variables, capture_output=True, text=True
    )
    assert (done.returncode, done.stdout.strip()) == (0, "1234"), done.stderr


@pytest.mark.parametrize(
    "requirement",
    ["trawlevil @ file:///tmp/evilsrc", "trawlevil @ https://files.example/trawlevil-1.0.tar.gz", "not a requirement!"],
)
def test_a_direct_url_requirement_is_a_400_naming_it_and_writes_nothing(ops, tmp_path, package_dirs, requirement):
    files = {"trawlshop/__init__.py": "", "trawlshop/spiders.py": ""}
    wheel = wheel_build(tmp_path, name="trawlshop", version="1.0.0", files=files, requires=["scrapy", requirement])

    response = upload(ops, wheel.read_bytes(), wheel.name)

    assert response.status_code == 400, response.content
    assert list(response.json()) == ["package"] and repr(requirement) in response.json()["package"][0]
    nothing_written(package_dirs)


def zip_of(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("members", "says"),
    [
        ({"trawlshop-1.0.0.dist-info/METADATA": b"\0" * (300 * 1024 * 1024)}, "unpacks to over"),
        ({f"trawlshop/m{n}.py": b"" for n in range(10_001)}, "over 10000 members"),
        ({"trawlshop/data.bin": b"\0" * (20 * 1024 * 1024)}, "compressed over 200 to one"),
    ],
    ids=["bomb", "members", "ratio"],
)
def test_a_zip_bomb_is_refused_unread(ops, tmp_path, package_dirs, members, says):
    """The zip check runs in the web process: an archive past the bounds is refused from its directory alone."""
    response = upload(ops, zip_of(members), "trawlshop-1.0.0-py3-none-any.whl")

    assert response.status_code == 400, response.content
    assert says in response.json()["package"][0] and "refused, unread" in response.json()["package"][0]
    nothing_written(package_dirs)
