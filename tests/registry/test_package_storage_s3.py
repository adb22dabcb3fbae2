"""Uploaded wheels in an S3-compatible bucket (django-storages) when TRAWL_PACKAGE_S3_BUCKET names one, against a real
local S3 server (moto's, tests/s3.py): the environment variables reach the storage in a process of its own, uploads
land in the bucket, and a host builds from it — or says why it cannot."""

from __future__ import annotations

import os

import pytest
from botocore.config import Config
from django.core.files.storage import storages

from project import env
from project.settings import _package_storage
from registry.models import PackageStatus, Scraper, StoredFile
from registry.packages.envs import EnvBuildError, env_lease
from registry.services.packages import version_upload
from tests.packages import dep_wheels, shop_wheel
from tests.registry.factories import make_scraper
from tests.s3 import free_port, moto_bucket
from tests.workers import last_json_line, script_run

pytestmark = pytest.mark.django_db
BUCKET = "trawl-packages"
VARIABLES = {
    "TRAWL_PACKAGE_S3_BUCKET": BUCKET,
    "TRAWL_PACKAGE_S3_REGION": "us-east-1",
    "TRAWL_PACKAGE_S3_ACCESS_KEY_ID": "testing",
    "TRAWL_PACKAGE_S3_SECRET_ACCESS_KEY": "testing",
    "TRAWL_PACKAGE_S3_PREFIX": "fleet/wheels",
}
SAVE_THROUGH_SETTINGS = """
import json, django
django.setup()
from django.core.files.base import ContentFile
from django.core.files.storage import storages
storage = storages["packages"]
saved = storage.save("ab12/made-by-a-process.whl", ContentFile(b"wheel bytes"))
print(json.dumps({"backend": type(storage).__name__, "saved": saved, "exists": storage.exists(saved)}))
"""

BACKEND = """
import json, django
django.setup()
from django.core.files.storage import storages
print(json.dumps(type(storages["packages"]).__name__))
"""


@pytest.fixture
def bucket():
    with moto_bucket(BUCKET) as served:
        yield served


@pytest.fixture
def s3_packages(bucket, settings, monkeypatch, tmp_path):
    """This process's package storage is the bucket, configured through the same variables and settings code."""
    endpoint, client = bucket
    for name, value in {**VARIABLES, "TRAWL_PACKAGE_S3_ENDPOINT_URL": endpoint}.items():
        monkeypatch.setattr(env, name.removeprefix("TRAWL_"), value)
    settings.STORAGES = {**settings.STORAGES, "packages": _package_storage()}
    settings.TRAWL_PACKAGE_CACHE_DIR = str(tmp_path / "envs")
    settings.TRAWL_PACKAGE_FIND_LINKS = [str(tmp_path / "wheelhouse")]
    settings.TRAWL_PACKAGE_NO_INDEX = True
    dep_wheels(tmp_path / "wheelhouse")
    return client


def uploaded(tmp_path):
    wheel = shop_wheel(tmp_path / "src", version="1.0.0", output="v1", dep="2.0")
    with open(wheel, "rb") as handle:
        version = version_upload(
            scraper=Scraper.objects.filter(name="shop").first() or make_scraper("shop"),
            package=handle,
            filename=wheel.name,
            version="1.0.0",
            spider="trawlshop.spiders.ShopSpider",
        )
    return version, wheel


def test_the_variables_put_a_process_s_package_storage_in_the_bucket(bucket, tmp_path):
    endpoint, client = bucket
    variables = {**os.environ, **VARIABLES, "TRAWL_PACKAGE_S3_ENDPOINT_URL": endpoint}

    done = script_run(SAVE_THROUGH_SETTINGS, env={**variables, "DJANGO_SETTINGS_MODULE": "project.settings"})

    assert done.returncode == 0, done.stderr
    assert last_json_line(done) == {"backend": "S3Storage", "saved": "ab12/made-by-a-process.whl", "exists": True}
    stored = client.get_object(Bucket=BUCKET, Key="fleet/wheels/ab12/made-by-a-process.whl")
    assert stored["Body"].read() == b"wheel bytes"
    unset = script_run(BACKEND, env={**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings"})
    assert last_json_line(unset) == "DatabaseStorage", unset.stderr


def test_an_upload_lands_in_the_bucket_and_a_host_builds_from_it(s3_packages, tmp_path):
    version, wheel = uploaded(tmp_path)

    key = f"fleet/wheels/{version.package.path}"
    assert s3_packages.get_object(Bucket=BUCKET, Key=key)["Body"].read() == wheel.read_bytes()
    assert not StoredFile.objects.exists(), "not in the database as well"
    env_of_version, fd = env_lease(package=version.package)
    os.close(fd)
    assert env_of_version.ready()
    assert version.package_status == PackageStatus.BUILDING


def test_a_wheel_missing_from_the_bucket_or_changed_there_does_not_build(s3_packages, tmp_path):
    version, _ = uploaded(tmp_path)
    key = f"fleet/wheels/{version.package.path}"

    swapped = shop_wheel(tmp_path / "other", version="1.0.0", output="swapped", dep="2.0")  # valid, other code
    s3_packages.put_object(Bucket=BUCKET, Key=key, Body=swapped.read_bytes())
    with pytest.raises(EnvBuildError, match=r"has SHA-256 \w+, not the uploaded wheel's"):
        env_lease(package=version.package)

    s3_packages.delete_object(Bucket=BUCKET, Key=key)
    with pytest.raises(EnvBuildError) as missing:
        env_lease(package=version.package)
    assert f"its wheel {version.package.path} is not in the package storage 'packages' (S3Storage)" in str(
        missing.value
    )


def test_an_unreachable_bucket_is_a_build_error_naming_it(s3_packages, tmp_path, settings):
    version, _ = uploaded(tmp_path)
    nowhere = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    options = {**settings.STORAGES["packages"]["OPTIONS"], "endpoint_url": nowhere}
    options["client_config"] = Config(retries={"max_attempts": 1, "mode": "standard"})  # no retries to wait for
    settings.STORAGES = {**settings.STORAGES, "packages": {**settings.STORAGES["packages"], "OPTIONS": options}}
    assert storages["packages"].endpoint_url == nowhere

    with pytest.raises(EnvBuildError, match=rf"could not be copied from the package storage 'packages' .*{nowhere}"):
        env_lease(package=version.package)
