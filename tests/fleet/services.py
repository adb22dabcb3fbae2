"""The services a fleet shares, each a real process owned by the test and listening on the fleet's bridge: a private
PostgreSQL (max_connections 100, as a stock server) behind PgBouncer in transaction mode, a Redis of its own, and
RabbitMQ (the machine's, in a vhost of our own, reached through a TCP relay since it listens on the loopback only).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg

from project.redis import redis_answers
from project.redis.server import redis_binary
from tests.chaos.harness import PrivatePostgres, free_port

RABBIT_PORT = 5672


def _wait(check, what: str, *, timeout: float = 30, process: subprocess.Popen | None = None, log: Path | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}: {log.read_text() if log else ''}")
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not answer within {timeout}s: {log.read_text() if log else ''}")


def _stop(process: subprocess.Popen | None) -> None:
    if process is None or process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(os.getpgid(process.pid), signal.SIGTERM)
    try:
        process.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(os.getpgid(process.pid), signal.SIGKILL)
        process.wait(5)


def pgbouncer_binary() -> str:
    """Debian installs it in /usr/sbin, which a non-root PATH may leave out; "" when it is not installed."""
    return shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if os.path.exists("/usr/sbin/pgbouncer") else "")


class PgBouncer:
    """PgBouncer in transaction mode in front of the private PostgreSQL (or any server on the loopback with trust
    authentication: anything with its `port`), at most `pool` server connections to its `database`."""

    def __init__(
        self, postgres: PrivatePostgres, *, listen: str, root: Path, pool: int = 40, database: str = "trawl"
    ) -> None:
        self.postgres, self.listen, self.root, self.pool, self.database = postgres, listen, root, pool, database
        self.port = free_port()
        self.log = root / "pgbouncer.log"
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"postgres://postgres@{self.listen}:{self.port}/{self.database}"

    def start(self) -> PgBouncer:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "users.txt").write_text('"postgres" ""\n')
        config = self.root / "pgbouncer.ini"
        config.write_text(
            "[databases]\n"
            f"{self.database} = host=127.0.0.1 port={self.postgres.port} dbname={self.database} user=postgres\n"
            "[pgbouncer]\n"
            f"listen_addr = {self.listen}\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.root / 'users.txt'}\n"
            f"pool_mode = transaction\ndefault_pool_size = {self.pool}\nmax_db_connections = {self.pool}\n"
            "max_client_conn = 5000\nadmin_users = postgres\nignore_startup_parameters = extra_float_digits\n"
            f"logfile = {self.log}\n"
        )
        if os.geteuid() == 0:  # PgBouncer refuses to run as root
            shutil.chown(self.root, "postgres", "postgres")
            for path in self.root.iterdir():
                shutil.chown(path, "postgres", "postgres")
        command = [pgbouncer_binary(), str(config)]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        with open(self.root / "pgbouncer.out", "ab") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        _wait(self._answers, "pgbouncer", process=self.process, log=self.root / "pgbouncer.out")
        return self

    def _answers(self) -> bool:
        try:
            with psycopg.connect(self.url.replace("postgres://", "postgresql://"), connect_timeout=2) as connection:
                connection.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def stop(self) -> None:
        _stop(self.process)


def server_connections(postgres: PrivatePostgres) -> int:
    """Client backends connected to the private PostgreSQL right now (this query's own excluded)."""
    with psycopg.connect(f"postgresql://postgres@127.0.0.1:{postgres.port}/postgres", autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchone()
    return int(row[0])


class BridgeRedis:
    """A redis-server of the test's own, listening on the bridge only (no persistence: nothing here restarts it)."""

    def __init__(self, *, listen: str, root: Path) -> None:
        self.listen, self.port = listen, free_port()
        self.log = root / "redis.log"
        self.process: subprocess.Popen | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://{self.listen}:{self.port}/{db}"

    def start(self) -> BridgeRedis:
        command = [redis_binary(), "--port", str(self.port), "--bind", self.listen, "--save", "", "--appendonly", "no"]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        _wait(lambda: redis_answers(self.url(), timeout=0.5), "redis-server", process=self.process, log=self.log)
        return self

    def stop(self) -> None:
        _stop(self.process)


class RabbitRelay:
    """RabbitMQ on the bridge: a TCP relay (tests/fleet/relay.py) to the machine's server on the loopback, and a vhost
    of this run's own, deleted at the end."""

    def __init__(self, *, listen: str, vhost: str) -> None:
        self.listen, self.vhost = listen, vhost
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@{self.listen}:{RABBIT_PORT}/{self.vhost}"

    def start(self) -> RabbitRelay:
        self._rabbitmqctl("delete_vhost", self.vhost, check=False)
        self._rabbitmqctl("add_vhost", self.vhost)
        self._rabbitmqctl("set_permissions", "-p", self.vhost, "guest", ".*", ".*", ".*")
        ends = [self.listen, str(RABBIT_PORT), "127.0.0.1", str(RABBIT_PORT)]
        relay = [sys.executable, "-m", "tests.fleet.relay", *ends]
        base = Path(__file__).resolve().parent.parent.parent
        self.process = subprocess.Popen(relay, cwd=base, start_new_session=True)
        _wait(self._answers, "the RabbitMQ relay", process=self.process)
        return self

    def _answers(self) -> bool:
        import socket

        try:
            with socket.create_connection((self.listen, RABBIT_PORT), timeout=1) as connection:
                connection.sendall(b"AMQP\x00\x00\x09\x01")
                return bool(connection.recv(8))
        except OSError:
            return False

    @staticmethod
    def _rabbitmqctl(*args: str, check: bool = True) -> None:
        done = subprocess.run(["rabbitmqctl", *args], capture_output=True, text=True, timeout=60)
        if check and done.returncode != 0:
            raise RuntimeError(f"rabbitmqctl {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")

    def stop(self) -> None:
        _stop(self.process)
        self._rabbitmqctl("delete_vhost", self.vhost, check=False)
