"""Every host equal: a packaged version uploaded on one host builds and runs on another that shares only the database
and Redis (and, when configured, an S3 bucket). Two hosts, each a working directory with a var/ of its own (its
TRAWL_PACKAGE_DIR and TRAWL_PACKAGE_CACHE_DIR, project/env.py) and a real worker process of its own; this test process
is host A's web. Also: a version whose stored wheel is gone ends `failed` saying so, and so do its jobs; a host that
cannot fetch a ready version's wheel fails its job with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import transaction

from project import env
from project.settings import _package_storage
from registry.models import ScraperVersion, StoredFile
from tests.callbacks.harness import running_alone
from tests.clients import client_for
from tests.conftest import wait_for_job
from tests.e2e.packages_stack import built, crawl, ok, outputs, shop_site, upload
from tests.packages import dep_wheels, shop_wheel
from tests.s3 import moto_bucket
from tests.workers import Worker

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = ["shop_site"]  # a fixture


@pytest.fixture
def hosts(tmp_path) -> dict[str, Path]:
    """Two hosts' working directories. Each has its own dependency wheels (as each host has its pip index)."""
    roots = {name: tmp_path / f"host-{name}" for name in ("a", "b")}
    for root in roots.values():
        dep_wheels(root / "wheelhouse")
    return roots


@pytest.fixture
def storage_env(request, settings, monkeypatch) -> dict[str, str]:
    """The hosts' package storage: the database (nothing to set), or a bucket of a local S3 server (moto) named by
    the TRAWL_PACKAGE_S3_* variables, for this process (host A's web) through the same settings code."""
    if request.param == "database":
        yield {}
        return
    with moto_bucket("trawl-packages") as (endpoint, client):
        variables = {
            "TRAWL_PACKAGE_S3_BUCKET": "trawl-packages",
            "TRAWL_PACKAGE_S3_ENDPOINT_URL": endpoint,
            "TRAWL_PACKAGE_S3_REGION": "us-east-1",
            "TRAWL_PACKAGE_S3_ACCESS_KEY_ID": "testing",
            "TRAWL_PACKAGE_S3_SECRET_ACCESS_KEY": "testing",
        }
        for name, value in variables.items():
            monkeypatch.setattr(env, name.removeprefix("TRAWL_"), value)
        settings.STORAGES = {**settings.STORAGES, "packages": _package_storage()}
        yield {**variables, "bucket": client}


def host_worker(root: Path, storage: dict, *, concurrency: int = 1) -> Worker:
    var = root / "var"
    host_env = {
        "TRAWL_PACKAGE_DIR": str(var / "packages"),
        "TRAWL_PACKAGE_CACHE_DIR": str(var / "package-envs"),
        "TRAWL_PACKAGE_FIND_LINKS": str(root / "wheelhouse"),
        "TRAWL_PACKAGE_NO_INDEX": "1",
    }
    variables = {name: value for name, value in storage.items() if name.startswith("TRAWL_")}
    root.mkdir(parents=True, exist_ok=True)
    return Worker(log_dir=root, cwd=root, concurrency=concurrency, env={**host_env, **variables})


def wheels_on_disk(root: Path, name: str) -> list[Path]:
    """Copies of the wheel on a host, other than the one inside the environment built from it."""
    return [path for path in root.rglob(name) if "package-envs" not in path.parts]


@pytest.mark.parametrize("storage_env", ["database", "s3"], indirect=True)
def test_a_wheel_uploaded_on_host_a_builds_and_runs_on_host_b_whose_disk_never_saw_it(
    hosts, storage_env, shop_site, api, tmp_path
):
    ops = client_for("ops", admin=True)
    ok(ops.post("/api/scrapers/", {"name": "pshop"}, format="json"), 201)
    wheel = shop_wheel(tmp_path / "src", version="1.0.0", output="v1", dep="2.0")

    # Host A: its web (this process) takes the upload through the API, its worker builds the version.
    with running_alone(host_worker(hosts["a"], storage_env)) as worker_a:
        assert ok(upload(ops, wheel, "1.0.0", is_default="true"), 201)["package_status"] == "building"
        assert built(ops, "1.0.0", worker_a)["package_status"] == "ready"
    package = ScraperVersion.objects.get(scraper__name="pshop", version="1.0.0").package
    assert (hosts["a"] / "var" / "package-envs" / package.sha256 / ".trawl-ready").exists()

    # Host A stopped. Host B never had the wheel or its environment; its two worker processes take two jobs at once.
    envs_b = hosts["b"] / "var" / "package-envs"
    assert not envs_b.exists()
    with running_alone(host_worker(hosts["b"], storage_env, concurrency=2)) as worker_b:
        jobs = crawl(api, shop_site, [1, 2], worker_b)
        log_b = worker_b.log_path.read_text()

    assert [outputs(job) for job in jobs] == [("1.0.0", "succeeded", "v1", "dep-2.0")] * 2
    assert {job.worker.split("/")[0] for job in jobs} == {worker_b.hostname}
    assert (envs_b / package.sha256 / ".trawl-ready").exists()
    assert log_b.count(f"package {package} built in") == 1, "host B built the environment once for both processes"
    for root in hosts.values():
        assert not (root / "var" / "packages").exists() and wheels_on_disk(root, package.filename) == []
    if "bucket" in storage_env:
        stored = storage_env["bucket"].get_object(Bucket="trawl-packages", Key=f"packages/{package.path}")
        assert stored["Body"].read() == wheel.read_bytes()
        assert not StoredFile.objects.exists()
    else:
        assert bytes(StoredFile.objects.get(name=package.path).data) == wheel.read_bytes()


def test_a_version_whose_stored_wheel_is_gone_ends_failed_and_its_jobs_say_why(
    hosts, shop_site, api, admin_client, tmp_path
):
    ops = client_for("ops", admin=True)
    ok(ops.post("/api/scrapers/", {"name": "pshop"}, format="json"), 201)
    wheel = shop_wheel(tmp_path / "src", version="1.0.0", output="v1", dep="2.0")
    # Uploaded, and its wheel lost from the storage before any worker got to it (the build is sent on commit).
    with transaction.atomic():
        ok(upload(ops, wheel, "1.0.0", is_default="true"), 201)
        StoredFile.objects.all().delete()
    version = ScraperVersion.objects.get(scraper__name="pshop", version="1.0.0")
    gone = f"its wheel {version.package.path} is not in the package storage"

    with running_alone(host_worker(hosts["b"], {})) as worker_b:
        failed = built(ops, "1.0.0", worker_b)
        assert failed["package_status"] == "failed"
        assert gone in failed["package_log"].splitlines()[0], failed["package_log"]
        spec = {"url": f"{shop_site.url}/product-1.html", "scraper": "pshop"}
        pinned = ok(api.post("/api/jobs/", {**spec, "version": "1.0.0"}, format="json"), 201)["id"]
        unpinned = ok(api.post("/api/jobs/", spec, format="json"), 201)["id"]
        jobs = [wait_for_job(job_id, timeout=60) for job_id in (pinned, unpinned)]

    for job in jobs:
        assert (job.status, job.error_class) == ("failed", "routing"), job.error_message
        assert "pshop' 1.0.0 failed to build" in job.error_message and gone in job.error_message
    page = admin_client.get(f"/admin/registry/scraperversion/{version.pk}/change/").content.decode()
    assert gone in page, "the admin shows why"


def test_a_host_that_cannot_fetch_a_ready_version_s_wheel_fails_its_job_saying_why(hosts, shop_site, api, tmp_path):
    ops = client_for("ops", admin=True)
    ok(ops.post("/api/scrapers/", {"name": "pshop"}, format="json"), 201)
    wheel = shop_wheel(tmp_path / "src", version="1.0.0", output="v1", dep="2.0")
    with running_alone(host_worker(hosts["a"], {})) as worker_a:
        ok(upload(ops, wheel, "1.0.0", is_default="true"), 201)
        assert built(ops, "1.0.0", worker_a)["package_status"] == "ready"
    package = ScraperVersion.objects.get(scraper__name="pshop", version="1.0.0").package
    StoredFile.objects.all().delete()  # lost after host A built it

    with running_alone(host_worker(hosts["b"], {})) as worker_b:
        jobs = crawl(api, shop_site, [1], worker_b)

    assert (jobs[0].status, jobs[0].error_class) == ("failed", "package")
    assert f"its wheel {package.path} is not in the package storage 'packages'" in jobs[0].error_message
    assert not (hosts["b"] / "var" / "package-envs" / package.sha256 / ".trawl-ready").exists()
