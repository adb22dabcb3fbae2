"""The API's front door (issue 41), attacked with an ordinary requester's token against the web as `make run` and
production run it: a real gunicorn (the Procfile's web command: two sync workers, 30 s timeout) with the production
settings, resolving through a local nameserver on which some names never answer.

- A batch naming slow names is a 400 naming each such item's `url`, answered (before the fix each name was resolved
  one after another, 10 s each, until gunicorn killed the worker: no answer at all); a submission over the
  requester's cap is a 429 before a single name is looked up.
- A token's requests are rate-limited across both gunicorn workers (429 with Retry-After).
- `?tail=²` is a 400 naming `tail`, not a 500.
- `/healthz` opens no broker connection per call, and a broker that is down is `down`, not its exception's text.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import dns.message
import pytest
import requests
from django.conf import settings

from access.models import Requester
from crawls.models import Batch, CrawlJob
from project.redis import get_redis, hash_tag, redis_key
from tests.clients import client_for
from tests.security.conftest import ALLOWED, ATTACKER_HOST, PRODUCTION_SECRET
from tests.security.nameserver import NameServer
from tests.workers import BASE_DIR
from tests.workers import test_database_url as database_url

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

RESOLVE_SECONDS = 3  # TRAWL_SUBMIT_RESOLVE_SECONDS of the web under test
RATE = 30  # requests per hour per requester (an hour: a test never straddles two windows of it in practice)
SLOW_NAMES = 5  # distinct names that never answer: one after another they took 50 s, past gunicorn's 30 s


class QuietNameServer(NameServer):
    """Answers `fast-*.test` with the attacker's "public" address at once and never answers `slow-*.test` (a name
    whose servers are down). Counts every question asked, answered or not."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: Counter = Counter()

    def _answer(self, query: dns.message.Message) -> dns.message.Message:
        names = [question.name.to_text().lower().rstrip(".") for question in query.question]
        self.asked.update(names)
        for name in names:
            if name.startswith("slow-"):
                raise TimeoutError("no answer")  # _serve sends nothing back
            self.rebinding(name, first=ATTACKER_HOST, then=ATTACKER_HOST)
        return super()._answer(query)


class Gunicorn:
    """The Procfile's `web` command on a free port of the loopback, with `env`; stopped even when a test fails."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.env, self.log_path = env, log_dir / f"gunicorn-{self.port}.log"
        self.process: subprocess.Popen | None = None

    def command(self) -> list[str]:
        line = next(line for line in (BASE_DIR / "Procfile").read_text().splitlines() if line.startswith("web:"))
        args = shlex.split(line.partition(":")[2])
        args[args.index("--bind") + 1] = f"127.0.0.1:{self.port}"
        return [str(Path(sys.executable).parent / args[0]), *args[1:]]

    def __enter__(self) -> Gunicorn:
        env = {**os.environ, "DATABASE_URL": database_url(), "REDIS_URL": settings.REDIS_URL, **self.env}
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command(), cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log()
            with contextlib.suppress(requests.RequestException):
                requests.get(f"{self.url}/api/", timeout=2)
                return self
            time.sleep(0.3)
        self.__exit__()
        raise RuntimeError(f"gunicorn never answered\n{self.log()}")

    def __exit__(self, *exc) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(os.getpgid(self.process.pid), signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(os.getpgid(self.process.pid), signal.SIGKILL)
                self.process.wait(5)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]


def production_env(**extra: str) -> dict[str, str]:
    return {
        "DJANGO_SETTINGS_MODULE": "project.settings_production",
        "SECRET_KEY": PRODUCTION_SECRET,
        "TRAWL_PRIVATE_TARGETS_ALLOWED": ALLOWED,
        "TRAWL_SECURE_SSL_REDIRECT": "0",  # plain HTTP on the loopback, as behind a TLS proxy
        "ALLOWED_HOSTS": "127.0.0.1",
        **extra,
    }


@pytest.fixture
def nameserver():
    with QuietNameServer() as server:
        yield server


@pytest.fixture
def web(builtins, nameserver, tmp_path):
    env = production_env(
        TRAWL_DNS_SERVERS=nameserver.address,
        TRAWL_SUBMIT_RESOLVE_SECONDS=str(RESOLVE_SECONDS),
        TRAWL_API_RATE=f"{RATE}/hour",
    )
    with Gunicorn(env, tmp_path) as gunicorn:
        yield gunicorn


def token_of(name: str, *, cap: int | None = None) -> dict[str, str]:
    client = client_for(name)
    if cap is not None:
        Requester.objects.filter(name=name).update(max_active_jobs=cap)
    return {"Authorization": client._credentials["HTTP_AUTHORIZATION"]}


def test_a_batch_of_slow_names_is_a_400_naming_them_and_the_cap_comes_before_any_lookup(web, nameserver):
    narrow = token_of("narrow", cap=2)
    over = {"jobs": [{"url": f"http://slow-cap-{n}.test/"} for n in range(3)]}
    refused = requests.post(f"{web.url}/api/batches/", json=over, headers=narrow, timeout=60)
    assert refused.status_code == 429, refused.text
    assert "max_active_jobs" in refused.json()["detail"]
    assert not [name for name in nameserver.asked if name.startswith("slow-cap-")], "a name was looked up first"

    wide = token_of("wide", cap=1000)
    specs = [{"url": f"http://fast-{n}.test/"} for n in range(45)]
    slow_at = [7, 15, 23, 31, 39]
    for n, index in enumerate(slow_at[:SLOW_NAMES]):
        specs.insert(index, {"url": f"http://slow-{n}.test/"})
    try:
        answer = requests.post(f"{web.url}/api/batches/", json={"jobs": specs}, headers=wide, timeout=120)
    except requests.ConnectionError as exc:  # gunicorn killed the worker at its timeout: no answer at all
        raise AssertionError(f"no answer to the batch: {exc}\n{web.log()}") from None

    assert answer.status_code == 400, f"{answer.status_code} {answer.text[:300]}\n{web.log()}"
    errors = answer.json()["jobs"]
    assert sorted(int(index) for index in errors) == slow_at
    for index in slow_at:
        assert "did not resolve within" in errors[str(index)]["url"][0], errors[str(index)]
    assert all(nameserver.asked[f"fast-{n}.test"] for n in range(45)), "the other names were checked too"
    assert not Batch.objects.exists() and not CrawlJob.objects.exists(), "a refused batch creates nothing"
    print(f"50-job batch with {SLOW_NAMES} names that never answer: 400 naming items {slow_at}")


def test_a_tokens_requests_are_rate_limited_across_web_workers(web):
    hammer = token_of("hammer")
    # Counts outlive a test's rows, and a flushed SQLite gives the next requester the same id: start from zero.
    stale = get_redis().keys(redis_key("api-rate", hash_tag(Requester.objects.get(name="hammer").pk), "*"))
    if stale:
        get_redis().delete(*stale)
    answers = []
    for _ in range(2 * RATE):
        # A new connection each time: gunicorn's two workers share them, so a per-process count would let 2x through.
        with requests.Session() as session:
            answers.append(session.get(f"{web.url}/api/jobs/", headers=hammer, timeout=30))

    codes = Counter(answer.status_code for answer in answers)
    assert codes[200] == RATE and codes[429] == RATE, codes
    limited = next(answer for answer in answers if answer.status_code == 429)
    assert 1 <= int(limited.headers["Retry-After"]) <= 3600
    assert "throttled" in limited.json()["detail"].lower()
    other = token_of("bystander")
    assert requests.get(f"{web.url}/api/jobs/", headers=other, timeout=30).status_code == 200, "per requester"
    print(f"{2 * RATE} requests by one token against a rate of {RATE}/hour: {dict(codes)}")


def test_tail_superscript_two_is_a_400_naming_tail(web):
    token = token_of("tailer")
    job = requests.post(f"{web.url}/api/jobs/", json={"url": "http://fast-tail.test/"}, headers=token, timeout=60)
    assert job.status_code == 201, job.text

    for value in ("²", "٣", "-1", "99999999999999999999"):
        answer = requests.get(f"{web.url}/api/jobs/{job.json()['id']}/log/", params={"tail": value}, headers=token)
        assert answer.status_code == 400, (value, answer.status_code, answer.text[:200])
        assert "tail" in answer.json()
    attempt = requests.get(f"{web.url}/api/jobs/{job.json()['id']}/log/", params={"attempt": "9" * 30}, headers=token)
    assert attempt.status_code == 400 and "attempt" in attempt.json()


class CountingBroker:
    """A TCP listener standing for a broker that is down (accepts, then hangs up): counts connections made to it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.accepted = 0
        self._stop = threading.Event()
        self.sock.settimeout(0.2)
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.sock.getsockname()[1]}//"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self.sock.close()


def test_healthz_opens_no_broker_connection_per_call_and_echoes_no_exception(tmp_path):
    broker = CountingBroker()
    host_port = urlsplit(broker.url).netloc.split("@")[1]
    env = production_env(CELERY_BROKER_URL=broker.url, TRAWL_HEALTHZ_CACHE_SECONDS="30")
    try:
        with Gunicorn(env, tmp_path) as gunicorn:
            first = requests.get(f"{gunicorn.url}/healthz", timeout=30)
            opened = broker.accepted
            answers = [requests.get(f"{gunicorn.url}/healthz", timeout=30) for _ in range(20)]
            after = broker.accepted
    finally:
        broker.close()

    assert first.status_code == 503 and first.json()["broker"] == "down", first.text
    assert all(answer.json() == first.json() for answer in answers), "every call answers the same fixed words"
    for text in (first.text, *(answer.text for answer in answers)):
        assert "Error" not in text and "refused" not in text.lower() and host_port not in text, text
    # Two gunicorn workers, each checking at most once per 30 s (a check may try the broker twice): 20 calls do not
    # mean 20 connections.
    assert after - opened <= 4 and after <= 6, f"{after} broker connections for 21 calls"
    print(f"21 /healthz calls, {after} broker connections; broker answer {first.json()['broker']!r}")
