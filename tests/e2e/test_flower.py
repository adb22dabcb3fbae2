"""Flower as `make run` starts it (Procfile, basic auth from FLOWER_BASIC_AUTH) shows crawl args and results."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings

from tests import workers

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

AUTH = "ops:flower,test-password"  # a comma: Flower's own FLOWER_* parsing would split it in two


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def procfile_flower_args() -> list[str]:
    line = next(line for line in (workers.BASE_DIR / "Procfile").read_text().splitlines() if line.startswith("flower:"))
    return line.split(":", 1)[1].split()


def get(url: str, *, auth: str | None = AUTH) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if auth:
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, b""
    except urllib.error.URLError:
        return 0, b""  # not listening yet


@pytest.fixture
def flower(tmp_path: Path, crawl_worker):
    port = free_port()
    args = [a for a in procfile_flower_args() if not a.startswith("--port")]
    # The password is the admin's: on the command line every user of the machine reads it in `ps`. flowerconfig.py
    # takes it from the environment.
    assert not any("basic-auth" in a or "FLOWER_BASIC_AUTH" in a for a in args), args
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings", "REDIS_URL": settings.REDIS_URL}
    env["FLOWER_BASIC_AUTH"] = AUTH
    env["DATABASE_URL"] = workers.test_database_url()
    with open(tmp_path / "flower.log", "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", *args, f"--port={port}"],
            cwd=workers.BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while get(f"{base}/healthcheck", auth=None)[0] != 200:
            assert process.poll() is None, (tmp_path / "flower.log").read_text()
            assert time.monotonic() < deadline, "flower did not start"
            time.sleep(0.2)
        # Events are Redis pub/sub: any sent before Flower's consumer attached are lost to it. The running worker's
        # heartbeat (every 2 s, an event) showing in Flower's own state says it has.
        attached_by = time.monotonic() + 30
        while not json.loads(get(f"{base}/workers?json=1")[1] or b"{}").get("data"):
            assert time.monotonic() < attached_by, (
                f"flower saw no worker's events\n{(tmp_path / 'flower.log').read_text()}"
            )
            time.sleep(0.2)
        yield base
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(10)


def test_flower_asks_for_basic_auth_and_shows_crawl_args_and_result(flower, api, builtins, site, job_waiter):
    job = api.post("/api/jobs/", {"url": f"{site.url}/product-2.html"}, format="json").json()
    assert job_waiter(job["id"]).status == "succeeded"

    tasks_url = f"{flower}/api/tasks?taskname=crawls.tasks.run_crawl"
    deadline, shown = time.monotonic() + 20, None
    while shown is None and time.monotonic() < deadline:
        tasks = json.loads(get(tasks_url)[1] or b"{}")
        shown = next((t for t in tasks.values() if job["id"] in (t.get("args") or "") and t.get("result")), None)
        time.sleep(0.3)

    assert get(tasks_url, auth=None)[0] == 401
    assert get(tasks_url, auth="ops:wrong")[0] == 401
    assert shown is not None, f"flower never showed run_crawl for {job['id']}"
    assert shown["args"] == f"['{job['id']}', 1]"
    assert shown["state"] == "SUCCESS"
    # SUCCESS whatever the crawl's outcome (so chords complete): the result says how it went, first thing.
    assert shown["result"].startswith(f"{{'status': 'succeeded', 'url': '{site.url}/product-2.html'"), shown["result"]


def test_housekeeping_tasks_stay_out_of_flowers_task_list(flower, api, builtins, site, job_waiter):
    from celery.result import AsyncResult

    from project.celery import app, quiet_beat

    sent_event = app.conf.task_send_sent_event
    quiet_beat()  # publish as beat does
    try:
        reaped = app.send_task("crawls.tasks.reap_dead_jobs", queue="control")
        swept = app.send_task("crawls.tasks.sweep_batches", queue="control")
    finally:
        app.conf.task_send_sent_event = sent_event
    AsyncResult(reaped.id, app=app).get(timeout=60)
    AsyncResult(swept.id, app=app).get(timeout=60)
    job = api.post("/api/jobs/", {"url": f"{site.url}/product-3.html"}, format="json").json()
    assert job_waiter(job["id"]).status == "succeeded"
    deadline, tasks = time.monotonic() + 20, {}
    while not any(job["id"] in (t.get("args") or "") for t in tasks.values()) and time.monotonic() < deadline:
        tasks = json.loads(get(f"{flower}/api/tasks")[1] or b"{}")
        time.sleep(0.3)

    names = {task.get("name") for task in tasks.values()}
    assert "crawls.tasks.run_crawl" in names, "the crawl must show"
    assert reaped.id not in tasks and swept.id not in tasks, f"housekeeping tasks shown: {names}"


def flower_task(flower: str, job_id: str) -> dict | None:
    """Flower's record of the job's run_crawl once it has an outcome (a result or an exception)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        tasks = json.loads(get(f"{flower}/api/tasks?taskname=crawls.tasks.run_crawl")[1] or b"{}")
        mine = [t for t in tasks.values() if job_id in (t.get("args") or "")]
        done = [t for t in mine if t.get("result") or t.get("exception")]
        if done:
            return done[0]
        time.sleep(0.3)
    return None


def test_flower_lists_job_id_url_and_outcome(flower, api, builtins, site, job_waiter):
    url = f"{site.url}/no-such-page.html"
    job = api.post("/api/jobs/", {"url": url}, format="json").json()
    ended = job_waiter(job["id"])
    assert (ended.status, ended.error_class) == ("failed", "http_4xx")

    shown = flower_task(flower, job["id"])
    assert shown is not None, f"flower never showed run_crawl for {job['id']}"
    # A failed crawl is a Celery FAILURE (Flower's Failed tile counts it), its error class first in the exception.
    assert shown["state"] == "FAILURE"
    assert shown["exception"].startswith("CrawlFailed('http_4xx: "), shown
    assert f"(job {job['id']}, {url})" in shown["exception"]
    workers = json.loads(get(f"{flower}/workers?json=1")[1] or b"{}").get("data", [])  # the Failed tile
    assert sum(worker.get("task-failed", 0) for worker in workers) >= 1, workers
    assert shown["args"] == f"['{job['id']}', 1]" and url in shown["kwargs"]
    # The list page shows those columns (Flower's default list has neither args, kwargs, result nor exception).
    status, page = get(f"{flower}/tasks")
    assert status == 200
    headers = re.findall(r"<th[^>]*>\s*([^<]+?)\s*</th>", page.decode())
    assert [h for h in headers if h in {"Name", "State", "args", "kwargs", "Result", "Exception"}] == [
        "Name", "State", "args", "kwargs", "Result", "Exception",
    ], headers  # fmt: skip
