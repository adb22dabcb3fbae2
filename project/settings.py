"""Django settings. Values that differ between machines come from project.env."""

from __future__ import annotations

import tempfile
from pathlib import Path

import dj_database_url
from django.core.management.utils import get_random_secret_key

from project import env

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
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
    # Uploaded scraper packages (wheels), one file per SHA-256; see TRAWL_PACKAGE_STORAGE.
    "packages": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": env.PACKAGE_DIR}},
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
}
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
    "loggers": {"scrapy": {"level": "WARNING"}, "twisted": {"level": "WARNING"}},
}

# Trawl's own settings (TRAWL_*), in a module of their own.
from project.trawl_settings import *  # noqa: E402, F403
