"""Every snippet of README.md, taken from the README itself and run as written against the demo shop.

Only what must differ on a test machine is substituted: the web and demo addresses (a live test server and a demo
shop on free ports instead of 8000 and 8001), `TOKEN=...` (a real token) and the `6f1c...` job id (the job the first
`curl` created). A snippet this test does not know fails it, so a new snippet needs a decision here.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from callbacks.signing import signature_header
from demo.generate import generate_site
from demo.serve import DemoServer
from tests.callbacks.harness import running_alone
from tests.conftest import wait_for_job
from tests.workers import BASE_DIR, Worker
from tests.workers import test_database_url as database_url

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

README = BASE_DIR / "README.md"
SHOP = {"categories": 2, "products_per_category": 7, "per_page": 3}
PRODUCTS = 14
NOT_RUN = {
    "make run": "starts every process until Ctrl-C; `make run` itself is what tests/test_compose.py checks",
    'curl -s -H "Authorization: Token $TOKEN" -F package': "needs a built wheel; tests/e2e/test_packages_e2e.py",
    "GET /api/jobs/<id>/log/": "sample output, not a command",
}


def readme_snippets() -> list[tuple[str, str]]:
    """(language, text) of every fenced block, in order."""
    return re.findall(r"^```(\w*)\n(.*?)^```", README.read_text(), flags=re.S | re.M)


def commands(script: str) -> list[str]:
    """A shell snippet's commands: continuation lines joined, comments and blank lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", script)
    lines = [line.split("  #")[0].strip() for line in joined.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def snippet(start: str) -> tuple[str, str]:
    found = [(lang, text) for lang, text in readme_snippets() if text.lstrip().startswith(start)]
    assert len(found) == 1, f"README.md should have one snippet starting {start!r}, found {len(found)}"
    return found[0]


@pytest.fixture
def demo_shop(tmp_path):
    with DemoServer(tmp_path / "site") as server:
        generate_site(server.root, server.url, **SHOP)
        yield server


@pytest.fixture
def myproject(tmp_path) -> Path:
    """The README's spider module, written where the README says it lives."""
    lang, code = snippet("# myproject/spiders.py")
    assert lang == "python"
    package = tmp_path / "code" / "myproject"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "spiders.py").write_text(code)
    return package.parent


@pytest.fixture
def readme_worker(myproject, django_db_setup, django_db_blocker, redis_server, tmp_path):
    """A crawl worker that can import `myproject` (the README: "the module must be importable by the workers")."""
    worker = Worker(env={"PYTHONPATH": f"{BASE_DIR}{os.pathsep}{myproject}"}, log_dir=tmp_path)
    with running_alone(worker):
        yield worker


def shell(command: str, *, env: dict[str, str], replacements: dict[str, str]) -> subprocess.CompletedProcess:
    for old, new in replacements.items():
        command = command.replace(old, new)
    return subprocess.run(
        ["bash", "-c", command], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def finished(job_id: str, worker: Worker):
    try:
        return wait_for_job(job_id, timeout=120)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- worker log ---\n{worker.log_tail()}") from None


def test_every_readme_snippet_is_known_to_this_test():
    starts = (
        "make run",
        "TOKEN=",
        "# myproject/spiders.py",
        ".venv/bin/python manage.py register_version",
        '{"item_links"',
        ".venv/bin/celery -A project inspect",
        "GET /api/jobs/<id>/log/",
        'curl -s -H "Authorization: Token $TOKEN" -F',
        "import hashlib",
    )
    unknown = [text.splitlines()[0] for _, text in readme_snippets() if not text.lstrip().startswith(starts)]
    assert not unknown, f"README snippets this test does not run or explain: {unknown}"


@pytest.mark.skipif(shutil.which("curl") is None, reason="the README's snippets use curl, which is not installed")
def test_readme_snippets_run_against_the_demo(
    api, requester, builtins, demo_shop, myproject, readme_worker, live_server
):
    from django.core.management import call_command

    call_command("seed_demo", base_url=demo_shop.url, credentials=myproject / "credentials.json", stdout=io.StringIO())
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": database_url(),
        "PYTHONPATH": f"{BASE_DIR}{os.pathsep}{myproject}",
    }
    web = live_server.url.removeprefix("http://")
    replacements = {"127.0.0.1:8000": web, "127.0.0.1:8001": demo_shop.url.removeprefix("http://")}

    # "Try it": submit, read, list items, cancel (of a job that ended: 409, which curl -s prints, as a user sees it).
    _, try_it = snippet("TOKEN=")
    steps = [line for line in commands(try_it) if not line.startswith("TOKEN=")]
    env["TOKEN"] = requester.plain_token
    created = shell(steps[0], env=env, replacements=replacements)
    job = json.loads(created.stdout)
    assert job["status"] == "queued", created.stdout + created.stderr
    assert finished(job["id"], readme_worker).status == "succeeded"
    replacements["6f1c..."] = job["id"]
    detail, items, cancel = (json.loads(shell(step, env=env, replacements=replacements).stdout) for step in steps[1:])
    assert (detail["status"], detail["scraper"]) == ("succeeded", "demo_shop")
    assert items["count"] == PRODUCTS
    assert "already ended" in cancel["detail"]

    # The spider and its registration, then a job on it: every product with the fields the spider reads.
    for step in commands(snippet(".venv/bin/python manage.py register_version")[1]):
        ran = shell(step, env=env, replacements=replacements)
        assert ran.returncode == 0, ran.stdout + ran.stderr
    response = api.post(
        "/api/jobs/", {"url": f"{demo_shop.url}/index.html", "scraper": "shop", "version": "1.0.0"}, format="json"
    )
    shop_job = finished(response.json()["id"], readme_worker)
    assert shop_job.status == "succeeded", shop_job.error_message
    rows = api.get(f"/api/jobs/{shop_job.pk}/items/?limit=100").json()["results"]
    assert len(rows) == PRODUCTS, "the README spider must find every demo product (it once looked for a.product)"
    assert all(row["data"]["sku"] and row["data"]["title"] and row["data"]["price"] for row in rows)

    # The selectors config, as a job's options.config.
    config = json.loads(snippet('{"item_links"')[1])
    response = api.post(
        "/api/jobs/",
        {"url": f"{demo_shop.url}/index.html", "scraper": "selectors", "options": {"config": config}},
        format="json",
    )
    selectors_job = finished(response.json()["id"], readme_worker)
    assert selectors_job.status == "succeeded", selectors_job.error_message
    assert selectors_job.stats["items"] == PRODUCTS

    # The celery inspect commands answer with the worker.
    for step in commands(snippet(".venv/bin/celery -A project inspect")[1]):
        if " inspect " not in step:
            continue  # control / purge change the cluster other tests use; `inspect` only reads it
        ran = shell(step, env=env, replacements=replacements)
        assert ran.returncode == 0 and "OK" in ran.stdout, ran.stdout + ran.stderr


def test_readme_signature_check_accepts_trawls_signature():
    namespace: dict = {}
    exec(snippet("import hashlib")[1], namespace)  # the README's own code is what is tested
    body = b'{"event": "job.completed"}'
    header = signature_header(secret="s3cret", body=body, timestamp=int(time.time()))

    assert namespace["trawl_signature_ok"]("s3cret", body, header)
    assert not namespace["trawl_signature_ok"]("other", body, header)
    assert not namespace["trawl_signature_ok"]("s3cret", body + b" ", header)
