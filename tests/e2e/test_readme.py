"""Every snippet of README.md, taken from the README itself and run as written against the demo shop.

Only what must differ on a test machine is substituted: the web and demo addresses (a live test server and a demo
shop on free ports instead of 8000 and 8001), `TOKEN=...` / `ADMIN_TOKEN=...` (real tokens) and `~/shopproject` (a
temporary directory). Shell variables the snippets set (`JOB=$(curl ...)`) are kept from one command to the next, as
in a terminal. The snippets run in order on a fresh database, so a later one cannot collide with an earlier one (the
packages section registers versions after the spider section's). A snippet this test does not know fails it, so a
new snippet needs a decision here.
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

from access.services import token_issue
from callbacks.signing import signature_header
from demo.generate import generate_site
from demo.serve import DemoServer
from registry.models import ScraperVersion
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
    """The README's project directory (`~/shopproject`): the spider module and the pyproject.toml, as it shows them."""
    lang, code = snippet("# myproject/spiders.py")
    assert lang == "python"
    package = tmp_path / "code" / "myproject"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "spiders.py").write_text(code)
    lang, pyproject = snippet("# ~/shopproject/pyproject.toml")
    assert lang == "toml"
    (package.parent / "pyproject.toml").write_text(pyproject)
    return package.parent


@pytest.fixture
def package_store(tmp_path) -> dict[str, str]:
    """Where the worker builds package environments. Wheels go to the package storage: the (test) database this
    process (the live server) and the worker share."""
    return {"TRAWL_PACKAGE_CACHE_DIR": str(tmp_path / "package-envs"), "TRAWL_PACKAGE_NO_INDEX": "1"}


@pytest.fixture
def readme_worker(myproject, package_store, django_db_setup, django_db_blocker, redis_server, tmp_path):
    """A crawl worker that can import `myproject` (the README: "the module must be importable by the workers")."""
    worker = Worker(env={"PYTHONPATH": f"{BASE_DIR}{os.pathsep}{myproject}", **package_store}, log_dir=tmp_path)
    with running_alone(worker):
        yield worker


def shell(command: str, *, env: dict[str, str], replacements: dict[str, str]) -> subprocess.CompletedProcess:
    """Run one command as a terminal would; `NAME=$(...)` keeps NAME in `env` for the next commands."""
    for old, new in replacements.items():
        command = command.replace(old, new)
    assigned = re.match(r"^([A-Z_]+)=\$\(", command)
    script = f'{command}\nprintf "%s" "${assigned[1]}"' if assigned else command
    ran = subprocess.run(
        ["bash", "-c", script], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    if assigned:
        env[assigned[1]] = ran.stdout
    return ran


def finished(job_id: str, worker: Worker):
    try:
        return wait_for_job(job_id, timeout=120)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- worker log ---\n{worker.log_tail()}") from None


def assert_products(api, demo_shop, worker: Worker, *, version: str, packaged: bool = False) -> None:
    """A job pinned to `version` of the README's `shop` finds every demo product with the fields the spider reads."""
    if packaged:
        deadline = time.monotonic() + 300
        while ScraperVersion.objects.get(scraper__name="shop", version=version).package_status == "building":
            assert time.monotonic() < deadline, f"shop {version} still building\n{worker.log_tail()}"
            time.sleep(0.5)
    response = api.post(
        "/api/jobs/", {"url": f"{demo_shop.url}/index.html", "scraper": "shop", "version": version}, format="json"
    )
    assert response.status_code == 201, response.content
    job = finished(response.json()["id"], worker)
    assert job.status == "succeeded", f"{job.error_class}: {job.error_message}"
    assert job.version.version == version and bool(job.version.package_id) == packaged
    rows = api.get(f"/api/jobs/{job.pk}/items/?limit=100").json()["results"]
    assert len(rows) == PRODUCTS, "the README spider must find every demo product (it once looked for a.product)"
    assert all(row["data"]["sku"] and row["data"]["title"] and row["data"]["price"] for row in rows)


def test_every_readme_snippet_is_known_to_this_test():
    starts = (
        "make run",
        "TOKEN=",
        "# myproject/spiders.py",
        "# ~/shopproject/pyproject.toml",
        ".venv/bin/python manage.py deploy",
        "ADMIN_TOKEN=",
        "# ~/shopproject/pyproject.toml",
        ".venv/bin/python manage.py deploy",
        "ADMIN_TOKEN=",
        ".venv/bin/python manage.py register_version",
        '{"item_links"',
        '{"url": "http://127.0.0.1:8001/new/index.html"',  # the rendering job: tests/demo/test_demo_shop_e2e.py
        ".venv/bin/celery -A project inspect",
        "GET /api/jobs/<id>/log/",
        "import hashlib",
    )
    unknown = [text.splitlines()[0] for _, text in readme_snippets() if not text.lstrip().startswith(starts)]
    assert not unknown, f"README snippets this test does not run or explain: {unknown}"


@pytest.mark.skipif(shutil.which("curl") is None, reason="the README's snippets use curl, which is not installed")
def test_readme_snippets_run_against_the_demo(
    api, requester, builtins, demo_shop, myproject, readme_worker, package_store, live_server
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
    env.update(package_store)  # `deploy` runs here: it stores the wheel where the worker reads it
    replacements = {
        "127.0.0.1:8000": web,
        "127.0.0.1:8001": demo_shop.url.removeprefix("http://"),
        "~/shopproject": str(myproject),
        "$HOME/shopproject": str(myproject),
    }

    # "Try it": submit (the id kept in $JOB), read, list items, cancel (of a job that ended: 409, which curl -s
    # prints, as a user sees it).
    _, try_it = snippet("TOKEN=")
    steps = [line for line in commands(try_it) if not line.startswith("TOKEN=")]
    env["TOKEN"] = requester.plain_token
    created = shell(steps[0], env=env, replacements=replacements)
    assert created.returncode == 0 and env["JOB"], created.stdout + created.stderr
    assert shell(steps[1], env=env, replacements=replacements).stdout.strip() == env["JOB"]
    assert finished(env["JOB"], readme_worker).status == "succeeded"
    detail, items, cancel = (json.loads(shell(step, env=env, replacements=replacements).stdout) for step in steps[2:])
    assert (detail["id"], detail["status"], detail["scraper"]) == (env["JOB"], "succeeded", "demo_shop")
    assert items["count"] == PRODUCTS
    assert "already ended" in cancel["detail"]

    # The spider and its registration, then a job on it: every product with the fields the spider reads.
    for step in commands(snippet(".venv/bin/python manage.py register_version")[1]):
        ran = shell(step, env=env, replacements=replacements)
        assert ran.returncode == 0, ran.stdout + ran.stderr
    assert_products(api, demo_shop, readme_worker, version="1.0.0")

    # The same project shipped as a package: `deploy` (1.2.0, after the spider section's 1.1.0), then by hand (1.3.0).
    (deploy,) = commands(snippet(".venv/bin/python manage.py deploy")[1])
    ran = shell(deploy, env=env, replacements=replacements)
    assert ran.returncode == 0, ran.stdout + ran.stderr + readme_worker.log_tail()
    assert "shop 1.2.0 is ready" in ran.stdout and "--scraper shop --version 1.2.0" in ran.stdout, ran.stdout
    assert_products(api, demo_shop, readme_worker, version="1.2.0", packaged=True)
    env["ADMIN_TOKEN"] = token_issue(requester_name="readme-admin", admin=True)[1]
    by_hand = [line for line in commands(snippet("ADMIN_TOKEN=")[1]) if not line.startswith("ADMIN_TOKEN=")]
    # A copy: pip builds in place, and its myproject.egg-info in a directory on the worker's PYTHONPATH would tell
    # the package build's pip that myproject is already installed.
    copy = shutil.copytree(myproject, myproject.parent / "shopproject-copy")
    replacements |= {"~/shopproject": str(copy), "$HOME/shopproject": str(copy)}
    wheel, upload = (shell(step, env=env, replacements=replacements) for step in by_hand)
    assert wheel.returncode == 0, wheel.stdout + wheel.stderr
    assert json.loads(upload.stdout)["package_status"] == "building", upload.stdout + upload.stderr
    assert_products(api, demo_shop, readme_worker, version="1.3.0", packaged=True)

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
