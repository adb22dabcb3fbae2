"""A packaged version whose dependencies make pip build a source tree on the worker, despite `--only-binary :all:`.

The author of a wheel an admin uploaded in good faith: a `Requires-Dist: x @ file:///<tree>` (or `@ https://…tar.gz`)
makes pip fetch that tree and run its build backend — any code — on the crawl worker, wheels-only or not. Said in the
uploaded wheel itself, the upload is a 400 naming the requirement and nothing is stored. Said by a dependency pip finds
(a wheel of the wheelhouse), the version's build on a real worker ends `failed` with the reason, and the backend never
ran (its marker file never appears). With `make run`'s settings and the production settings.
"""

from __future__ import annotations

import pytest

from registry.models import Package, ScraperVersion
from tests.clients import client_for
from tests.packages import hostile_source_tree, wheel_build
from tests.security.test_packaged_frontier import packaged_worker
from tests.security.test_packaged_secrets import (
    built,
    child_users_swept,
    package_dirs,
    upload,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = ["child_users_swept", "package_dirs", "packaged_worker"]  # fixtures
SPIDER = "import scrapy\n\n\nclass S(scrapy.Spider):\n    name = 's'\n"


def test_direct_url_requirements_are_refused_at_upload_and_never_built(packaged_worker, package_dirs, tmp_path, mode):
    marker = tmp_path / "backend-ran"
    tree = hostile_source_tree(tmp_path / "evilsrc", marker=marker)
    ops = client_for("ops", admin=True)
    assert ops.post("/api/scrapers/", {"name": "psecrets"}, format="json").status_code == 201
    files = {"direct/__init__.py": "", "direct/spiders.py": SPIDER}

    for requirement in (f"trawlevil @ {tree.as_uri()}", "trawlevil @ https://files.example/trawlevil-1.0.tar.gz"):
        wheel = wheel_build(
            package_dirs["src"] / "direct", name="direct", version="1.0.0", files=files, requires=[requirement]
        )
        refused = upload(ops, wheel, "1.0.0", "direct.spiders.S")
        assert refused.status_code == 400 and list(refused.json()) == ["package"], refused.content
        assert repr(requirement) in refused.json()["package"][0] and "direct URL" in refused.json()["package"][0]
    assert not Package.objects.exists() and not ScraperVersion.objects.filter(scraper__name="psecrets").exists()

    # A dependency that pip finds in the wheelhouse says it instead.
    middle = {"trawlmiddle/__init__.py": ""}
    wheel_build(
        package_dirs["wheelhouse"],
        name="trawlmiddle",
        version="1.0",
        files=middle,
        requires=[f"trawlevil @ {tree.as_uri()}"],
    )
    files = {"deep/__init__.py": "", "deep/spiders.py": SPIDER}
    wheel = wheel_build(
        package_dirs["src"] / "deep", name="deep", version="1.0.0", files=files, requires=["trawlmiddle==1.0"]
    )
    assert upload(ops, wheel, "1.0.0", "deep.spiders.S").status_code == 201
    failed = built(ops, "1.0.0", packaged_worker)

    print(f"[{mode}] {failed['package_status']}: {failed['package_log'][:300]}")
    assert not marker.exists(), "the direct URL's build backend ran on the worker"
    assert failed["package_status"] == "failed"
    assert "Trawl refuses direct URL requirements: trawlmiddle requires 'trawlevil @ file://" in failed["package_log"]
