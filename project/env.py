"""Every environment variable Trawl reads, in one place, with its default."""

from __future__ import annotations

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent


def _bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


def _list(name: str, default: str) -> list[str]:
    return [part.strip() for part in os.environ.get(name, default).split(",") if part.strip()]


DEBUG = _bool("DEBUG", False)
# Only development may run without a secret; production settings refuse to start without one.
SECRET_KEY = os.environ.get("SECRET_KEY", "")
ALLOWED_HOSTS = _list("ALLOWED_HOSTS", "127.0.0.1,localhost")
DATABASE_URL = os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR / 'var' / 'trawl.sqlite3'}")
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
EGRESS_LABEL = os.environ.get("TRAWL_EGRESS_LABEL", "default")
JOB_TIMEOUT = _int("TRAWL_JOB_TIMEOUT", 600)
HEARTBEAT_SECONDS = _int("TRAWL_HEARTBEAT_SECONDS", 5)
WORKER_MAX_TASKS_PER_CHILD = _int("TRAWL_WORKER_MAX_TASKS_PER_CHILD", 200)
WORKER_MAX_MEMORY_KB = _int("TRAWL_WORKER_MAX_MEMORY_KB", 1_000_000)
LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO")
