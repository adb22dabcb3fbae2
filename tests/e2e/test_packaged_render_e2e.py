"""A packaged version's rendered crawl, through a real worker: the child process renders with its own Chromium, and
the screenshots it took are the job's, on the API like an in-process crawl's."""

from __future__ import annotations

import pytest

from tests.clients import client_for
from tests.conftest import wait_for_job
from tests.e2e.packages_stack import built, ok, package_dirs, package_worker, shop_site, upload
from tests.packages import shop_wheel

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = ["package_dirs", "package_worker", "shop_site"]  # fixtures


def test_a_packaged_rendered_job_keeps_the_screenshots_its_child_took(package_worker, package_dirs, shop_site, api):
    ops = client_for("ops", admin=True)
    ok(ops.post("/api/scrapers/", {"name": "pshop"}, format="json"), 201)
    wheel = shop_wheel(package_dirs["src"], version="1.0.0", output="v1", dep="1.0")
    ok(upload(ops, wheel, "1.0.0", is_default="true"), 201)
    assert built(ops, "1.0.0", package_worker)["package_status"] == "ready"

    url = f"{shop_site.url}/product-1.html"
    body = {"url": url, "scraper": "pshop", "options": {"render": True, "screenshots": 1}}
    job = wait_for_job(ok(api.post("/api/jobs/", body, format="json"), 201)["id"], timeout=120)

    assert job.status == "succeeded", (job.error_class, job.error_message, package_worker.log_tail())
    assert job.stats["render"]["pages"] == 1 and job.stats["render"]["screenshots"] == 1, job.stats
    shots = ok(api.get(f"/api/jobs/{job.pk}/screenshots/"))
    assert [(shot["reason"], shot["url"]) for shot in shots] == [("asked", url)]
    image = api.get(shots[0]["image_url"])
    assert image["Content-Type"] == "image/jpeg" and image.content[:3] == b"\xff\xd8\xff"
