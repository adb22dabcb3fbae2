"""docker-compose.yml's PgBouncer (docker/pgbouncer/entrypoint.sh), run here with Debian's pgbouncer as its image runs
it, in front of a private PostgreSQL: transaction pooling, clients authenticated with the configured password, and
Trawl's Django (TRAWL_DATABASE_POOLING=transaction) working through it, `.iterator()` included."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

from tests.chaos.harness import PrivatePostgres, free_port
from tests.fleet.services import pgbouncer_binary

ROOT = Path(__file__).resolve().parent.parent
ENTRYPOINT = ROOT / "docker" / "pgbouncer" / "entrypoint.sh"
PASSWORD = "s3cret-for-the-test"


@pytest.fixture
def bouncer():
    if not pgbouncer_binary():
        pytest.skip("pgbouncer is not installed")
    postgres = PrivatePostgres(max_connections=100).create()
    folder = Path(tempfile.mkdtemp(prefix="trawl-pgbouncer-"))  # pytest's own folders are closed to other users
    port = free_port()
    env = {
        "PATH": f"{Path(pgbouncer_binary()).parent}:{os.environ['PATH']}",
        "DATABASE_HOST": "127.0.0.1",
        "DATABASE_PORT": str(postgres.port),
        "DATABASE_NAME": "trawl",
        "DATABASE_USER": "postgres",
        "DATABASE_PASSWORD": PASSWORD,
        "PGBOUNCER_LISTEN": "127.0.0.1",
        "PGBOUNCER_PORT": str(port),
        "PGBOUNCER_DIR": str(folder),
        "PGBOUNCER_POOL_SIZE": "5",
    }
    command = [str(ENTRYPOINT)]
    if os.geteuid() == 0:  # as the image runs it: never root (PgBouncer refuses)
        shutil.chown(folder, "postgres", "postgres")
        command = ["runuser", "-u", "postgres", "--", "env", *(f"{k}={v}" for k, v in env.items()), str(ENTRYPOINT)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"postgresql://postgres:{PASSWORD}@127.0.0.1:{port}/trawl"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                psycopg.connect(url, connect_timeout=2).close()
                break
            except psycopg.OperationalError:
                assert process.poll() is None, process.stdout.read().decode()
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(15)
        postgres.destroy()
        shutil.rmtree(folder, ignore_errors=True)


def test_clients_need_the_password(bouncer):
    with psycopg.connect(bouncer) as connection:
        assert connection.execute("SELECT 1").fetchone() == (1,)
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(bouncer.replace(PASSWORD, "wrong"), connect_timeout=5)


def test_the_entrypoint_refuses_to_start_without_a_password(tmp_path):
    env = {"PATH": os.environ["PATH"], "PGBOUNCER_DIR": str(tmp_path)}
    done = subprocess.run([str(ENTRYPOINT)], env=env, capture_output=True, text=True, timeout=30)

    assert done.returncode != 0 and "set DATABASE_PASSWORD" in done.stderr
    assert not (tmp_path / "pgbouncer.ini").exists()


def test_trawls_django_works_through_it_iterator_included(bouncer):
    script = (
        "import django; django.setup()\n"
        "from django.core.management import call_command\n"
        "call_command('migrate', 'contenttypes', verbosity=0)\n"
        "from django.contrib.contenttypes.models import ContentType\n"
        "ContentType.objects.bulk_create([ContentType(app_label=f'a{n}', model='m') for n in range(3000)])\n"
        "print(sum(1 for _ in ContentType.objects.filter(model='m').iterator(chunk_size=100)))\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": bouncer.replace("postgresql://", "postgres://"),
        "TRAWL_DATABASE_POOLING": "transaction",
    }
    command = [sys.executable, "-c", script]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "3000"
