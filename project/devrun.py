"""`make run`: prepare the database, Redis and the demo, then run every process (project.supervise) until Ctrl-C,
printing the banner again with "ready" once every process answers."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from project import env

BASE_DIR = env.BASE_DIR
VAR = BASE_DIR / "var"
DEMO_BASE_URL = "http://127.0.0.1:8001"


def manage(*args: str, capture: bool = False) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        check=True,
        text=True,
        stdout=subprocess.PIPE if capture else None,
    )
    return result.stdout or ""


def persistent_secret(name: str) -> str:
    """A random value made once per checkout, so sessions and logins survive restarts."""
    path = VAR / name
    if not path.exists():
        path.write_text(secrets.token_urlsafe(32))
        path.chmod(0o600)
    return path.read_text().strip()


READY_TIMEOUT_SECONDS = 300


STARTING = "Trawl is starting (Ctrl-C stops everything):"


def banner(credentials: dict, flower_auth: str, *, headline: str = STARTING) -> str:
    return "\n".join(
        [
            "",
            headline,
            "  web / API   http://127.0.0.1:8000/api/jobs/   (docs: http://127.0.0.1:8000/api/docs/)",
            f"  admin       http://127.0.0.1:8000/admin/      user {credentials['admin_user']}"
            f" / password {credentials['admin_password']}",
            "  dashboard   http://127.0.0.1:8000/admin/ops/dashboard/   (staff)",
            "  metrics     http://127.0.0.1:8000/metrics      stats: http://127.0.0.1:8000/api/stats/",
            "  scrapyd     http://127.0.0.1:6800/   (scrapyd's JSON API; also http://127.0.0.1:8000/scrapyd/)",
            f"  flower      http://127.0.0.1:5555/            basic auth {flower_auth}",
            f"  demo shop   {DEMO_BASE_URL}/",
            f"  redis       {env.REDIS_URL}",
            f"  database    {env.DATABASE_URL.split('@')[-1]}",
            f"  API token   {credentials['api_token']}  (requester {credentials['requester']}, admin)",
            "",
            "Try:",
            f"  curl -s -H 'Authorization: Token {credentials['api_token']}' -H 'Content-Type: application/json' \\",
            f'    -d \'{{"url": "{DEMO_BASE_URL}/index.html", "scraper": "demo_shop"}}\' http://127.0.0.1:8000/api/jobs/',
            "",
        ]
    )


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # our own loopback services
            return response.status < 500
    except urllib.error.HTTPError as exc:
        return exc.code < 500  # Flower's basic auth answers 401: it is up
    except OSError:
        return False


def _workers_answer() -> bool:
    from project.presence import presence_recent

    host = os.uname().nodename
    return all(presence_recent(f"{name}@{host}") for name in ("crawl", "ops", "hooks"))


def readiness_wait(supervisor, *, timeout: float = READY_TIMEOUT_SECONDS) -> bool:
    """True once web (/healthz), Flower, the demo and both Celery workers answer; False on stop or timeout."""
    checks = {
        "web": lambda: _answers("http://127.0.0.1:8000/healthz"),
        "flower": lambda: _answers("http://127.0.0.1:5555/healthcheck"),
        "demo": lambda: _answers(f"{DEMO_BASE_URL}/"),
        "workers": _workers_answer,
    }
    deadline = time.monotonic() + timeout
    while checks and time.monotonic() < deadline and not supervisor.stopping.is_set():
        for name, check in list(checks.items()):
            try:
                if check():
                    del checks[name]
            except Exception:  # not ready yet, whatever the reason
                pass
        time.sleep(1)
    if checks and not supervisor.stopping.is_set():
        supervisor.say("system", f"not ready after {timeout:.0f}s: {', '.join(checks)} not answering (see above)")
    return not checks


def main() -> int:
    from django.core.exceptions import ImproperlyConfigured

    from project.config_guard import refuse_unworkable

    try:  # before anything starts: a configuration that cannot work stops here, naming the setting
        refuse_unworkable(os.environ, broker_url=env.CELERY_BROKER_URL, result_backend=env.CELERY_RESULT_BACKEND)
    except ImproperlyConfigured as exc:
        print(f"Trawl cannot start: {exc}", file=sys.stderr)
        return 2
    VAR.mkdir(exist_ok=True)
    os.environ.setdefault("SECRET_KEY", persistent_secret("secret.key"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ.setdefault("TRAWL_SPIDER_RELOAD", "1")  # an edited spider module is used by the next job
    bin_dir = str(Path(sys.executable).parent)
    os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")

    from project.redis.server import redis_start_if_absent

    # Crawl frontiers live in Redis: its append-only file under var/redis/ keeps them across restarts.
    redis = redis_start_if_absent(env.REDIS_URL, log_path=str(VAR / "redis.log"), data_dir=str(VAR / "redis"))
    if redis:
        print(
            f"No Redis answered at {env.REDIS_URL}: started one (pid {redis.pid}, log var/redis.log,"
            " data var/redis/appendonly.aof)"
        )
    try:
        manage("migrate", "--noinput", "-v", "0")
        manage("collectstatic", "--noinput", "-v", "0")
        subprocess.run(
            [sys.executable, "-m", "demo.generate", "--out", "demo/site", "--base-url", DEMO_BASE_URL],
            cwd=BASE_DIR,
            check=True,
        )
        seeded = manage("seed_demo", "--base-url", DEMO_BASE_URL, capture=True)
        credentials = json.loads(seeded.strip().splitlines()[-1])
        flower_auth = os.environ.setdefault("FLOWER_BASIC_AUTH", f"admin:{credentials['admin_password']}")
        print(banner(credentials, flower_auth), flush=True)
        from project.supervise import supervise

        def announce_ready(supervisor) -> None:
            if readiness_wait(supervisor):
                ready = "Trawl is ready: every process answers (Ctrl-C stops everything):"
                supervisor.say("system", banner(credentials, flower_auth, headline=ready))

        return supervise(BASE_DIR / "Procfile", cwd=BASE_DIR, on_started=announce_ready)
    finally:
        if redis is not None:
            redis.terminate()
            redis.wait(10)


if __name__ == "__main__":
    sys.exit(main())
