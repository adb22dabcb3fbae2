"""Every environment variable Trawl reads, in one place, with its default."""

from __future__ import annotations

import os
import socket
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
# "transaction" when DATABASE_URL goes through PgBouncer (or another pooler) in transaction mode: no server-side
# cursors then, since the next transaction of a client may run on another server connection (docs/deploy.md).
DATABASE_POOLING = os.environ.get("TRAWL_DATABASE_POOLING", "").strip().lower()
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
# Engines (docs/brokers.md): the Celery broker and result store may live apart from Trawl's state (REDIS_URL), e.g.
# `amqp://user:pass@host:5672/vhost` for RabbitMQ. Unset: REDIS_URL carries them, as `make run` has always done.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or REDIS_URL
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND") or REDIS_URL
INSTALLATION_ID = os.environ.get("TRAWL_INSTALLATION_ID", "")
# The per-IP bucket a host's requests count against: the host's own by default, so a fleet's hosts never share one by
# accident (project/presence.py refuses two hosts on one label unless TRAWL_EGRESS_SHARED says they share an address).
EGRESS_LABEL = os.environ.get("TRAWL_EGRESS_LABEL") or socket.gethostname()
EGRESS_SHARED = _bool("TRAWL_EGRESS_SHARED", False)
JOB_TIMEOUT = _int("TRAWL_JOB_TIMEOUT", 600)
HEARTBEAT_SECONDS = _int("TRAWL_HEARTBEAT_SECONDS", 5)
INFRA_PATIENCE_SECONDS = _int("TRAWL_INFRA_PATIENCE_SECONDS", 120)
# A crawl process whose reactor does not answer this long while it crawls is replaced, its crawls handed back (0: off).
REACTOR_STALL_SECONDS = _int("TRAWL_REACTOR_STALL_SECONDS", 15)
# Crawls one crawl process runs at once on its reactor (project/pools/crawlhost.py); 1: one crawl per prefork process.
# 16 on `make run`'s 2 processes: 32 polite crawls progress at once on a small machine, each costing megabytes.
CRAWLS_PER_PROCESS = _int("TRAWL_CRAWLS_PER_PROCESS", 16)
WORKER_MAX_TASKS_PER_CHILD = _int("TRAWL_WORKER_MAX_TASKS_PER_CHILD", 200)
WORKER_MAX_MEMORY_KB = _int("TRAWL_WORKER_MAX_MEMORY_KB", 1_000_000)
LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO")


def _float(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value else default


# Batches and webhooks (see the TRAWL_BATCH_* / TRAWL_WEBHOOK_* settings for what each means).
BATCH_MAX_JOBS = _int("TRAWL_BATCH_MAX_JOBS", 5000)
DEFAULT_MAX_ACTIVE_JOBS = _int("TRAWL_DEFAULT_MAX_ACTIVE_JOBS", 100)
BATCH_LAUNCH_GRACE_SECONDS = _float("TRAWL_BATCH_LAUNCH_GRACE_SECONDS", 120)
BATCH_JOB_LOST_SECONDS = _float("TRAWL_BATCH_JOB_LOST_SECONDS", 900)
WEBHOOK_MAX_ATTEMPTS = _int("TRAWL_WEBHOOK_MAX_ATTEMPTS", 8)
WEBHOOK_BACKOFF_SECONDS = _float("TRAWL_WEBHOOK_BACKOFF_SECONDS", 10)
WEBHOOK_BACKOFF_MAX_SECONDS = _float("TRAWL_WEBHOOK_BACKOFF_MAX_SECONDS", 1800)
WEBHOOK_TIMEOUT_SECONDS = _float("TRAWL_WEBHOOK_TIMEOUT_SECONDS", 10)
WEBHOOK_DEADLINE_SECONDS = _float("TRAWL_WEBHOOK_DEADLINE_SECONDS", 15)
WEBHOOK_SWEEP_GRACE_SECONDS = _float("TRAWL_WEBHOOK_SWEEP_GRACE_SECONDS", 120)
PUBLIC_URL = os.environ.get("TRAWL_PUBLIC_URL", "http://127.0.0.1:8000")

# The API's front door (README "API limits"): requests per requester, rows per page, resolving submitted names.
API_RATE = os.environ.get("TRAWL_API_RATE", "600/minute")
API_ADMIN_RATE = os.environ.get("TRAWL_API_ADMIN_RATE", "6000/minute")
API_MAX_PAGE_SIZE = _int("TRAWL_API_MAX_PAGE_SIZE", 200)
SUBMIT_RESOLVE_SECONDS = _float("TRAWL_SUBMIT_RESOLVE_SECONDS", 10)
SUBMIT_RESOLVE_CONCURRENCY = _int("TRAWL_SUBMIT_RESOLVE_CONCURRENCY", 16)
HEALTHZ_CACHE_SECONDS = _float("TRAWL_HEALTHZ_CACHE_SECONDS", 5)

# Politeness for domains without a DomainThrottle rule (requests per second and bucket size).
THROTTLE_DEFAULT_RATE = _float("TRAWL_THROTTLE_DEFAULT_RATE", 2.0)
THROTTLE_DEFAULT_BURST = _int("TRAWL_THROTTLE_DEFAULT_BURST", 10)
# Requests in flight at once per domain across the cluster: Scrapy's CONCURRENT_REQUESTS_PER_DOMAIN default.
THROTTLE_DEFAULT_CONCURRENCY = _int("TRAWL_THROTTLE_DEFAULT_CONCURRENCY", 8)
THROTTLE_SLOT_LEASE = _float("TRAWL_THROTTLE_SLOT_LEASE", 30)
THROTTLE_ROBOTS_TTL = _float("TRAWL_THROTTLE_ROBOTS_TTL", 3600)

# Reliability: the job reaper (docs/failure-handling.md). Stale = no heartbeat for this long; default 3 beats + 15 s.
REAPER_INTERVAL_SECONDS = _int("TRAWL_REAPER_INTERVAL_SECONDS", 15)
REAPER_STALE_SECONDS = _float("TRAWL_REAPER_STALE_SECONDS", 3 * HEARTBEAT_SECONDS + 15)
REAPER_QUEUED_SECONDS = _float("TRAWL_REAPER_QUEUED_SECONDS", 900)
# Durable crawls: how long a shard's in-flight requests stay its own without a renewal (docs/failure-handling.md).
FRONTIER_ENABLED = _bool("TRAWL_FRONTIER_ENABLED", True)
FRONTIER_LEASE_SECONDS = _float("TRAWL_FRONTIER_LEASE_SECONDS", 30)
# Outgoing-request guard: refuse private, loopback and link-local targets (on in production settings).
BLOCK_PRIVATE_TARGETS = _bool("TRAWL_BLOCK_PRIVATE_TARGETS", False)
# Production settings (project.settings_production) only.
BLOCK_PRIVATE_TARGETS_PRODUCTION = _bool("TRAWL_BLOCK_PRIVATE_TARGETS", True)
PRIVATE_TARGETS_ALLOWED = _list("TRAWL_PRIVATE_TARGETS_ALLOWED", "")
# Proxy groups any requester's job may name in `options.config.proxy_group` (admins and sources name any).
PROXY_GROUPS_PUBLIC = _list("TRAWL_PROXY_GROUPS_PUBLIC", "")
# DNS servers ("ip[:port]", comma-separated) crawls and webhooks resolve through; empty: the system resolver.
DNS_SERVERS = _list("TRAWL_DNS_SERVERS", "")
SECURE_SSL_REDIRECT = _bool("TRAWL_SECURE_SSL_REDIRECT", True)
HSTS_SECONDS = _int("TRAWL_HSTS_SECONDS", 31_536_000)
# Behind a TLS-terminating proxy that sets X-Forwarded-Proto (and strips it from clients).
TRUST_X_FORWARDED_PROTO = _bool("TRAWL_TRUST_X_FORWARDED_PROTO", False)
CSRF_TRUSTED_ORIGINS = _list("CSRF_TRUSTED_ORIGINS", "")

# Packaged scraper versions (docs/packages.md): where uploaded wheels are stored (where every host reaches them: the
# database, or an S3-compatible bucket when TRAWL_PACKAGE_S3_BUCKET names one), where each machine builds their
# environments, and where pip finds their dependencies.
PACKAGE_S3_BUCKET = os.environ.get("TRAWL_PACKAGE_S3_BUCKET", "")
PACKAGE_S3_PREFIX = os.environ.get("TRAWL_PACKAGE_S3_PREFIX", "packages")
PACKAGE_S3_ENDPOINT_URL = os.environ.get("TRAWL_PACKAGE_S3_ENDPOINT_URL", "")
PACKAGE_S3_REGION = os.environ.get("TRAWL_PACKAGE_S3_REGION", "")
# Empty: boto3's own chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, ~/.aws, an instance role).
PACKAGE_S3_ACCESS_KEY_ID = os.environ.get("TRAWL_PACKAGE_S3_ACCESS_KEY_ID", "")
PACKAGE_S3_SECRET_ACCESS_KEY = os.environ.get("TRAWL_PACKAGE_S3_SECRET_ACCESS_KEY", "")
PACKAGE_S3_ADDRESSING_STYLE = os.environ.get("TRAWL_PACKAGE_S3_ADDRESSING_STYLE", "")  # "path" for most non-AWS stores
# Where wheels were kept before they moved to the database: `manage.py trawl_packages_import` copies them from here.
PACKAGE_DIR = os.environ.get("TRAWL_PACKAGE_DIR", str(BASE_DIR / "var" / "packages"))
PACKAGE_MAX_BYTES = _int("TRAWL_PACKAGE_MAX_BYTES", 20 * 1024 * 1024)
# A packaged crawl's child gets a Redis user of its own (runtime.packaged.child_redis); 0: REDIS_URL itself.
PACKAGE_CHILD_REDIS_ACL = _bool("TRAWL_PACKAGE_CHILD_REDIS_ACL", True)
# Whether children start while a Redis user needs no password (then a child logs in as that user, past its own):
# yes in development (`make run`'s Redis has none), never in the production settings unless said so.
PACKAGE_REDIS_NOPASS_ALLOWED = _bool("TRAWL_PACKAGE_REDIS_NOPASS_ALLOWED", True)
PACKAGE_REDIS_NOPASS_ALLOWED_PRODUCTION = _bool("TRAWL_PACKAGE_REDIS_NOPASS_ALLOWED", False)
PACKAGE_CACHE_DIR = os.environ.get("TRAWL_PACKAGE_CACHE_DIR", str(BASE_DIR / "var" / "package-envs"))
PACKAGE_FIND_LINKS = _list("TRAWL_PACKAGE_FIND_LINKS", "")
PACKAGE_NO_INDEX = _bool("TRAWL_PACKAGE_NO_INDEX", False)
PACKAGE_CHILD_IDLE_SECONDS = _float("TRAWL_PACKAGE_CHILD_IDLE_SECONDS", 120)
# Development (`make run` sets it): a worker imports an edited spider module again for its next job.
SPIDER_RELOAD = _bool("TRAWL_SPIDER_RELOAD", False)
# Operations (docs/operations.md): stalled crawls, retention, alert webhooks.
STALL_SECONDS = _float("TRAWL_STALL_SECONDS", 600)
RETENTION_DAYS = _int("TRAWL_RETENTION_DAYS", 30)
ALERT_WEBHOOK_URL = os.environ.get("TRAWL_ALERT_WEBHOOK_URL", "")
# A scrape token for /metrics (besides admin API tokens); empty: only admin API tokens scrape.
STATS_METRICS_TOKEN = os.environ.get("TRAWL_STATS_METRICS_TOKEN", "")

# Rendering: the Chromium the machine's package manager installed, and how many pages a worker process opens at once.
CHROMIUM = os.environ.get("TRAWL_RENDER_CHROMIUM", "/usr/bin/chromium")
RENDER_MAX_PAGES = _int("TRAWL_RENDER_MAX_PAGES", 4)
RENDER_RECYCLE_PAGES = _int("TRAWL_RENDER_RECYCLE_PAGES", 500)
# Resident memory (MiB) of the process's Chromium processes above which its browser is retired like after its pages.
RENDER_RECYCLE_MEMORY_MB = _int("TRAWL_RENDER_RECYCLE_MEMORY_MB", 2048)

# Responses that made a spider raise, kept per job, and the bytes kept of each (runtime/watch/error_pages.py).
ERROR_PAGES_MAX = _int("TRAWL_ERROR_PAGES_MAX", 5)
ERROR_PAGE_MAX_BYTES = _int("TRAWL_ERROR_PAGE_MAX_BYTES", 64 * 1024)
# Errors to Sentry (project/sentry.py): off when empty.
SENTRY_DSN = os.environ.get("SENTRY_DSN", "")
SENTRY_ENVIRONMENT = os.environ.get("SENTRY_ENVIRONMENT", "")
