"""A real Redis Cluster of three masters for tests: `redis-server` processes in cluster mode on free loopback ports,
joined with `redis-cli --cluster create`, stopped even when the tests fail.

`redis_cluster_url` (tests/conftest.py) starts it once per session. `on_redis_cluster` is an autouse module fixture: a
module that imports it runs every test with Trawl's state (REDIS_URL) on the cluster — this process and the workers
and children it starts — while the Celery broker and results stay on the session's plain Redis (a cluster cannot be
Celery's Redis broker).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.conf import settings
from redis.cluster import RedisCluster

MASTERS = 3


def cluster_binaries() -> tuple[str, str] | None:
    """(redis-server, redis-cli) from PATH, or None when either is absent."""
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    return (server, cli) if server and cli else None


def _free_ports(count: int) -> list[int]:
    """Free ports whose cluster bus port (port + 10000) is free too."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port + 10000 > 65535 or port in ports:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        ports.append(port)
    return ports


@contextlib.contextmanager
def redis_cluster(directory: Path) -> Iterator[str]:
    """Yields the cluster's URL, `redis+cluster://127.0.0.1:<port>/`, once every slot is served."""
    found = cluster_binaries()
    if found is None:
        raise RuntimeError("redis-server or redis-cli is not on PATH")
    server, cli = found
    ports = _free_ports(MASTERS)
    processes: list[subprocess.Popen] = []
    try:
        for port in ports:
            node = directory / str(port)
            node.mkdir(parents=True, exist_ok=True)
            options = ["--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes"]
            options += ["--cluster-config-file", "nodes.conf", "--dir", str(node), "--save", "", "--appendonly", "no"]
            log = open(node / "redis.log", "wb")  # noqa: SIM115 - the server writes it until it stops
            processes.append(subprocess.Popen([server, *options], stdout=log, stderr=subprocess.STDOUT))
        for port in ports:
            _wait_ping(port)
        create = [cli, "--cluster", "create", *(f"127.0.0.1:{port}" for port in ports), "--cluster-yes"]
        done = subprocess.run(create, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {done.stdout}{done.stderr}")
        _wait_cluster_ok(ports)
        yield f"redis+cluster://127.0.0.1:{ports[0]}/"
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def _clients_forget() -> None:
    """Drop this process's cached Redis clients (and the scripts bound to them): the next call builds them anew."""
    from project.redis import get_redis
    from runtime.frontier import store

    for cached in (get_redis, store.binary_redis, store._scripts):
        cached.cache_clear()


@pytest.fixture(scope="module", autouse=True)
def on_redis_cluster(redis_cluster_url: str) -> Iterator[str]:
    saved_url = settings.REDIS_URL
    saved_env = {name: os.environ.get(name) for name in ("REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND")}
    os.environ["CELERY_BROKER_URL"] = os.environ.get("CELERY_BROKER_URL") or saved_url
    os.environ["CELERY_RESULT_BACKEND"] = os.environ.get("CELERY_RESULT_BACKEND") or saved_url
    os.environ["REDIS_URL"] = settings.REDIS_URL = redis_cluster_url
    _clients_forget()
    try:
        yield redis_cluster_url
    finally:
        settings.REDIS_URL = saved_url
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        _clients_forget()


def _wait_ping(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if redis.Redis(port=port, socket_timeout=1).ping():
                return
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.05)


def _wait_cluster_ok(ports: list[int], timeout: float = 30.0) -> None:
    """Every node reports `cluster_state:ok` and a client sees all three masters."""
    deadline = time.monotonic() + timeout
    while True:
        states = [redis.Redis(port=port, decode_responses=True).cluster("info")["cluster_state"] for port in ports]
        if all(state == "ok" for state in states):
            client = RedisCluster(host="127.0.0.1", port=ports[0])
            try:
                if len(client.get_primaries()) == MASTERS:
                    return
            finally:
                client.close()
        if time.monotonic() > deadline:
            raise RuntimeError(f"the cluster never became ok: {states}")
        time.sleep(0.1)
