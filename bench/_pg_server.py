"""What bench/item_upserts.py reads from the PostgreSQL server around a phase: WAL positions and how much of the WAL
between two is full-page images, other databases' commits meanwhile, and the CPU of the server's own processes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import psutil

AUX = ("walwriter", "checkpointer", "background writer", "autovacuum")  # PostgreSQL's own processes


def aux_cpu() -> dict[int, float]:
    seconds = {}
    for process in psutil.process_iter(["cmdline"]):
        title = " ".join(process.info["cmdline"] or ())
        if title.startswith("postgres:") and any(name in title for name in AUX):
            try:
                seconds[process.pid] = sum(process.cpu_times()[:2])
            except psutil.Error:
                continue
    return seconds


class Server:
    """The bench's own connection: checkpoints, WAL positions, other databases' commits, full-page-image bytes."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.connection = psycopg.connect(url, autocommit=True)
        version = self.value("SHOW server_version_num") // 10000
        wal_dir = os.path.join(self.value("SHOW data_directory"), "pg_wal")
        waldump = shutil.which("pg_waldump") or f"/usr/lib/postgresql/{version}/bin/pg_waldump"
        local = url.split("@")[-1].startswith(("127.0.0.1", "localhost"))
        self.waldump = [waldump, "--path", wal_dir] if local and os.access(wal_dir, os.R_OK) else None
        self.waldump = self.waldump if self.waldump and os.access(waldump, os.X_OK) else None

    def value(self, sql: str):
        value = self.connection.execute(sql).fetchone()[0]
        return int(value) if isinstance(value, str) and value.isdigit() else value

    def lsn(self) -> str:
        return self.value("SELECT pg_current_wal_lsn()::text")

    def wal_bytes(self, start: str, end: str) -> int:
        return int(self.value(f"SELECT pg_wal_lsn_diff('{end}', '{start}')"))

    def commits(self) -> dict[int, int]:
        """Commits so far in every other database, by its oid (a database dropped meanwhile drops out)."""
        self.connection.execute("SELECT pg_stat_clear_snapshot()")
        rows = self.connection.execute(
            "SELECT datid, xact_commit FROM pg_stat_database "
            "WHERE datname IS NOT NULL AND datname <> current_database()"
        )
        return dict(rows.fetchall())

    def fpi_bytes(self, start: str, end: str) -> int | None:
        """Bytes of full-page images in the WAL between two positions (pg_waldump --stats), or None if unreadable."""
        if not self.waldump or start == end:
            return None
        out = subprocess.run(
            [*self.waldump, "--start", start, "--end", end, "--stats"], capture_output=True, text=True, check=False
        )
        total = re.search(r"^Total\s+\d+\s+\d+ \[[^]]*\]\s+(\d+)", out.stdout, re.M)  # count, records, images
        if not total:
            print(f"pg_waldump {start}..{end}: {out.stderr.strip()[-300:]}", file=sys.stderr)
        return int(total.group(1)) if total else None
