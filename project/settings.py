"""Django settings. Values that differ between machines come from project.env."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.core.management.utils import get_random_secret_key

from project import env
from project.config_guard import refuse_unworkable
from project.sentry import sentry_init

BASE_DIR = env.BASE_DIR
DEBUG = env.DEBUG
# A random key per process is safe for a dev box; sessions simply do not survive a restart.
SECRET_KEY = env.SECRET_KEY or get_random_secret_key()
ALLOWED_HOSTS = env.ALLOWED_HOSTS

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "access",
    "registry",
    "crawls",
    "sources",
    "throttling",
    "items",
    "callbacks",
    "ops",
    "catalog",
    # Only for `manage.py seed_demo` (no models): the demo sits above every app, so its command lives with it.
    "demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # DRF's JSON parser reads the stream itself, past Django's DATA_UPLOAD_MAX_MEMORY_SIZE check: 413 first.
    "project.web.limits.BodySizeLimitMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Every 404 under /api/ is JSON, even Django's DEBUG page for a URL no view matches (a malformed job id).
    "project.errors.ApiNotFoundMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Trawl's Redis away: a 503 with the reason for the admin's views too (DRF's handler covers the API).
    "project.web.unavailable.RedisUnavailableMiddleware",
]

ROOT_URLCONF = "project.urls"
WSGI_APPLICATION = "project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]


def _database() -> dict:
    config = dj_database_url.parse(env.DATABASE_URL, conn_max_age=60, conn_health_checks=True)
    if config["ENGINE"] == "django.db.backends.sqlite3":
        Path(config["NAME"]).parent.mkdir(parents=True, exist_ok=True)
        # Web, workers and beat write concurrently: WAL lets readers through and IMMEDIATE avoids lock upgrades.
        config["OPTIONS"] = {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
        }
        config["CONN_MAX_AGE"] = 0
        # A file, not memory, so worker subprocesses started by tests share the test database.
        config["TEST"] = {"NAME": str(Path(tempfile.gettempdir()) / f"trawl-test-{_test_db_suffix()}.sqlite3")}
    elif env.DATABASE_POOLING == "transaction":
        # `.iterator()` would open a server-side cursor in one transaction and read it from another server connection.
        config["DISABLE_SERVER_SIDE_CURSORS"] = True
    elif env.DATABASE_POOLING:
        raise ImproperlyConfigured(f"TRAWL_DATABASE_POOLING is {env.DATABASE_POOLING!r}: only 'transaction' (or unset)")
    return config


def _test_db_suffix() -> str:
    import os

    return os.environ.get("TRAWL_TEST_DB_SUFFIX") or str(os.getpid())


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"


def _package_storage() -> dict:
    """The database (registry.packages.storage), or an S3-compatible bucket (django-storages) when one is named."""
    if not env.PACKAGE_S3_BUCKET:
        return {"BACKEND": "registry.packages.storage.DatabaseStorage"}
    options = {
        "bucket_name": env.PACKAGE_S3_BUCKET,
        "location": env.PACKAGE_S3_PREFIX.strip("/"),
        "endpoint_url": env.PACKAGE_S3_ENDPOINT_URL,
        "region_name": env.PACKAGE_S3_REGION,
        "access_key": env.PACKAGE_S3_ACCESS_KEY_ID,
        "secret_key": env.PACKAGE_S3_SECRET_ACCESS_KEY,
        "addressing_style": env.PACKAGE_S3_ADDRESSING_STYLE,
    }
    # Named by content (<sha256>/<file>): writing a name again writes the same bytes.
    fixed = {"file_overwrite": True, "default_acl": None, "querystring_auth": False}
    return {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {**{k: v for k, v in options.items() if v}, **fixed},
    }


STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
    # Uploaded scraper packages (wheels), one file per SHA-256, where every host reaches them (TRAWL_PACKAGE_STORAGE).
    "packages": _package_storage(),
}
# Request bodies bigger than this are refused before any view parses them.
DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["access.authentication.RequesterTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["access.permissions.IsRequester"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "project.web.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "project.errors.api_exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # JSON only (415 otherwise): a JSON body sent without its Content-Type must not be read as form fields. The
    # version upload adds multipart/form-data itself.
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    # Per requester, counted in Trawl's Redis so every web worker and host shares the count: 429 with Retry-After.
    "DEFAULT_THROTTLE_CLASSES": ["access.throttling.RequesterRateThrottle"],
}
# Requests per requester (all its tokens together) and per admin: "N/second|minute|hour|day"; empty: no limit.
TRAWL_API_RATE = env.API_RATE
TRAWL_API_ADMIN_RATE = env.API_ADMIN_RATE
# Rows on one page of any list (`?limit=` above it gets this many): an item may be large, a page must not be.
TRAWL_API_MAX_PAGE_SIZE = env.API_MAX_PAGE_SIZE
# Submitted URLs' and callbacks' names are resolved (guard on) concurrently, this many at once, all within this many
# seconds: a name that does not answer in time is a 400 naming its field, never a web worker held past its timeout.
TRAWL_SUBMIT_RESOLVE_SECONDS = env.SUBMIT_RESOLVE_SECONDS
TRAWL_SUBMIT_RESOLVE_CONCURRENCY = env.SUBMIT_RESOLVE_CONCURRENCY
# /healthz answers from its last check this long: probes and anonymous callers cannot make it open connections.
TRAWL_HEALTHZ_CACHE_SECONDS = env.HEALTHZ_CACHE_SECONDS
SPECTACULAR_SETTINGS = {
    "TITLE": "Trawl API",
    "DESCRIPTION": "Submit and watch Scrapy crawls run on Celery workers.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI is served from the sidecar package: no CDN, works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # Several models have a `status`: name each enum, so the schema (and `check --deploy`) has no collision warning.
    "ENUM_NAME_OVERRIDES": {
        "JobStatusEnum": "crawls.models.JobStatus",
        "BatchStatusEnum": "crawls.models.BatchStatus",
        "DeliveryStatusEnum": "callbacks.models.DeliveryStatus",
    },
}

REDIS_URL = env.REDIS_URL
# The Celery broker and result store (CELERY_BROKER_URL, CELERY_RESULT_BACKEND) are celeryconfig's alone, read from
# project.env; not Django settings, so their credentials never reach what copies settings (a packaged crawl's child).
# Namespaces Trawl's Redis keys (project.redis.installation); empty: derived from the database.
TRAWL_INSTALLATION_ID = env.INSTALLATION_ID
CELERY_BEAT_SCHEDULER = "crawls.beat:LeaderScheduler"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.LOG_LEVEL},
    # trawl.package: packaged crawls' records (runtime.packaged.channel), quiet on the console as `scrapy` is.
    "loggers": {"scrapy": {"level": "WARNING"}, "twisted": {"level": "WARNING"}, "trawl.package": {"level": "WARNING"}},
}

# Trawl's own settings (TRAWL_*), in a module of their own.
from project.trawl_settings import *  # noqa: E402, F403
from project.trawl_settings_control import *  # noqa: E402, F403

# Errors to Sentry when SENTRY_DSN is set (project/sentry.py); nothing is sent, or imported, when it is not.
SENTRY_DSN = env.SENTRY_DSN
sentry_init(dsn=SENTRY_DSN, environment=env.SENTRY_ENVIRONMENT)

# Every process (web, workers, beat, manage.py) refuses engine settings that cannot work, naming the setting.
refuse_unworkable(os.environ, broker_url=env.CELERY_BROKER_URL, result_backend=env.CELERY_RESULT_BACKEND)
