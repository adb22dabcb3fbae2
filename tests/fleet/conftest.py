"""The fleet: three hosts (network namespaces a, b and c on a bridge), sharing only PostgreSQL (through PgBouncer),
RabbitMQ and Redis, all real processes. Built once for the module and removed whatever happens. Skipped, with the
reason, only where network namespaces cannot be made (not root, no `ip`) or PgBouncer is not installed."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.chaos.harness import PrivatePostgres
from tests.fleet.hosts import BASE_DIR, FleetHost
from tests.fleet.network import SUFFIX, Bridge, Host, netns_unavailable
from tests.fleet.services import BridgeRedis, PgBouncer, RabbitRelay, pgbouncer_binary
from tests.fleet.site import FleetSite

# What every host's processes get; nothing of the test process's own environment (its REDIS_URL, test settings).
KEPT_FROM_ENVIRONMENT = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
# The pool PgBouncer keeps to PostgreSQL: the fleet's whole budget of server connections.
SERVER_POOL = 40


@dataclass
class Fleet:
    hosts: dict[str, FleetHost]
    postgres: PrivatePostgres
    bouncer: PgBouncer
    redis: BridgeRedis
    tokens: dict[str, str]
    root: Path
    site_address: str
    sites: list[FleetSite] = field(default_factory=list)

    def site(self, name: str, writer) -> FleetSite:
        folder = self.root / "sites" / name
        writer(folder)
        site = FleetSite(folder, host=self.site_address).__enter__()
        self.sites.append(site)
        return site

    def logs(self) -> str:
        return "\n".join(host.logs_tail() for host in self.hosts.values())


def _host_env(*, bouncer: PgBouncer, redis: BridgeRedis, rabbit: RabbitRelay, secret: str) -> dict[str, str]:
    env = {name: os.environ[name] for name in KEPT_FROM_ENVIRONMENT if name in os.environ}
    return {
        **env,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}",
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "SECRET_KEY": secret,
        "ALLOWED_HOSTS": "*",
        "DATABASE_URL": bouncer.url,
        "TRAWL_DATABASE_POOLING": "transaction",
        "REDIS_URL": redis.url(0),
        "CELERY_BROKER_URL": rabbit.url,
        "CELERY_RESULT_BACKEND": redis.url(1),
    }


def _database_setup(postgres: PrivatePostgres, env: dict[str, str]) -> dict[str, str]:
    direct = {**env, "DATABASE_URL": postgres.url, "TRAWL_DATABASE_POOLING": "", "PYTHONPATH": str(BASE_DIR)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.fleet.setup_database"],
        cwd=BASE_DIR,
        env=direct,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def fleet() -> Iterator[Fleet]:
    reason = netns_unavailable() or ("" if pgbouncer_binary() else "pgbouncer is not installed")
    if reason:
        pytest.skip(f"the fleet test cannot run here: {reason}")
    root = Path(tempfile.mkdtemp(prefix=f"trawl-fleet-{SUFFIX}-"))
    root.chmod(0o755)  # PgBouncer runs as the postgres user and reads its files below
    bridge = Bridge()
    started: list = []
    built: Fleet | None = None
    try:
        bridge.create()
        postgres = PrivatePostgres(max_connections=100).create()
        started.append(postgres.destroy)
        bouncer = PgBouncer(postgres, listen=bridge.address, root=root / "pgbouncer", pool=SERVER_POOL).start()
        started.append(bouncer.stop)
        redis = BridgeRedis(listen=bridge.address, root=root).start()
        started.append(redis.stop)
        rabbit = RabbitRelay(listen=bridge.address, vhost=f"trawl_fleet_{SUFFIX}").start()
        started.append(rabbit.stop)
        env = _host_env(bouncer=bouncer, redis=redis, rabbit=rabbit, secret=secrets.token_urlsafe(40))
        tokens = _database_setup(postgres, env)
        hosts = {}
        for number, letter in enumerate("abc", start=1):
            host = Host(bridge, letter, number).create()
            started.append(host.destroy)
            hosts[letter] = FleetHost(host, root=root, env=env).install()
            started.append(hosts[letter].stop)
        for host in hosts.values():
            for role in ("web", "ops", "beat"):
                host.start(role)
        built = Fleet(hosts, postgres, bouncer, redis, tokens, root, bridge.address)
        yield built
    finally:
        for site in built.sites if built else ():
            site.__exit__(None, None, None)
        for stop in reversed(started):
            with contextlib.suppress(Exception):
                stop()
        bridge.destroy()
        shutil.rmtree(root, ignore_errors=True)
