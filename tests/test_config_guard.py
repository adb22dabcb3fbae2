"""Engine settings that cannot work are refused as every process starts, naming the setting (project/config_guard.py):
with REDIS_URL on a Redis Cluster and Celery's settings left to default to it, Trawl used to start and then fail every
task's end with MovedError in the workers."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.workers import BASE_DIR

CLUSTER = "redis+cluster://127.0.0.1:7000"
SINGLE = "redis://127.0.0.1:6379/5"


def run(args: list[str], **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in {"CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"}}
    base.update({"DJANGO_SETTINGS_MODULE": "project.settings", "SECRET_KEY": "x" * 50, **env})
    return subprocess.run([sys.executable, *args], cwd=BASE_DIR, env=base, capture_output=True, text=True, timeout=120)


def test_make_run_refuses_a_cluster_as_broker_and_result_store_naming_both_settings():
    done = run(["-m", "project.devrun"], REDIS_URL=CLUSTER)

    assert done.returncode == 2
    assert "REDIS_URL names a Redis Cluster and CELERY_BROKER_URL is unset" in done.stderr
    assert "CELERY_RESULT_BACKEND is unset" in done.stderr


def test_every_django_process_refuses_a_result_backend_on_a_cluster():
    done = run(["manage.py", "check"], REDIS_URL=CLUSTER, CELERY_BROKER_URL=SINGLE)

    assert done.returncode != 0
    assert "REDIS_URL names a Redis Cluster and CELERY_RESULT_BACKEND is unset" in done.stderr
    assert "CELERY_BROKER_URL" not in done.stderr.split("ImproperlyConfigured:")[-1]


def test_a_cluster_for_state_with_celery_on_a_single_redis_starts():
    done = run(["manage.py", "check"], REDIS_URL=CLUSTER, CELERY_BROKER_URL=SINGLE, CELERY_RESULT_BACKEND=SINGLE)

    assert done.returncode == 0, done.stderr
