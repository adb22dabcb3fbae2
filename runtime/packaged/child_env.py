"""What a packaged version's child process is given: an environment and settings built from allow-lists.

The child runs code uploaded with the package, which a requester's crawl drives: it is treated as hostile. It gets
none of the worker's secrets — no database URL, no SECRET_KEY, no broker or result-backend URL, no metrics token, no
cloud credentials — because its environment is made of the few variables named here, never `os.environ` minus what
looks secret (a secret added to the worker's environment tomorrow would leak). Its Django settings are
project.settings_child: no database, a throwaway SECRET_KEY, and the values of the parent's settings that Trawl's
crawl components read (CHILD_SETTINGS), sent as JSON in TRAWL_CHILD_SETTINGS. The Redis URL it gets is its own
(runtime.packaged.child_redis).
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

from django.conf import settings

from project.installation import installation_id

# Variables of the worker's environment a Python process running Scrapy needs: where programs and the home are, the
# locale and time zone, the temporary directory, CA certificates, and the egress proxy Scrapy's HttpProxyMiddleware
# reads (the crawl's own way out, not a secret kept from the crawl).
CHILD_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
)
# Settings Trawl's crawl components read in the child (defaults a scraper or version did not override). Families by
# prefix, so a knob added to one (TRAWL_THROTTLE_*, ...) reaches the child; a component that runs in children and
# reads a setting of another family adds it here. Nothing here may hold a secret.
CHILD_SETTING_PREFIXES = (
    "TRAWL_SCRAPY_",
    "TRAWL_THROTTLE_",
    "TRAWL_PROXY_",
    "TRAWL_FRONTIER_",
    "TRAWL_INCREMENTAL",
    "TRAWL_JOB_LOG_",
    "TRAWL_BLOCK_",
    "TRAWL_PRIVATE_TARGETS_",
    "TRAWL_DNS_",
    "TRAWL_MONITOR_",
    "TRAWL_STALL_",
    "TRAWL_PACKAGE_CHILD",
)
CHILD_SETTINGS = (
    "INSTALLED_APPS",
    "DEFAULT_AUTO_FIELD",
    "USE_TZ",
    "TIME_ZONE",
    "LOGGING",
    "TRAWL_EGRESS_LABEL",
    "TRAWL_INFRA_PATIENCE_SECONDS",
    "TRAWL_USER_AGENTS",
    "TRAWL_ITEM_CHUNK",
)
PR_SET_DUMPABLE = 4  # prctl(2)


def child_environment(*, channel_fd: int, redis_url: str) -> dict[str, str]:
    """The child's whole environment: CHILD_ENV's variables the worker has, and the child's own."""
    variables = {name: os.environ[name] for name in CHILD_ENV if name in os.environ}
    return {
        **variables,
        # Trawl's code first, then the package's environment (its site-packages, then Trawl's via a .pth).
        "PYTHONPATH": str(settings.BASE_DIR),
        "DJANGO_SETTINGS_MODULE": "project.settings_child",
        "TRAWL_CHILD_FD": str(channel_fd),
        "TRAWL_CHILD_SETTINGS": json.dumps(child_settings(redis_url=redis_url), default=str),
    }


def child_settings(*, redis_url: str) -> dict[str, Any]:
    """The parent's values of the settings the child's components read, and the Redis URL meant for the child."""
    names = [name for name in dir(settings) if name.startswith(CHILD_SETTING_PREFIXES) or name in CHILD_SETTINGS]
    values = {name: getattr(settings, name) for name in names}
    # Apps for their models (components import services that import them); not the admin, whose autodiscovery
    # imports every API module and the settings they read.
    values["INSTALLED_APPS"] = [app for app in settings.INSTALLED_APPS if app != "django.contrib.admin"]
    # The child has no database to derive the installation's id (its Redis namespace) from: its parent's.
    return {**values, "TRAWL_INSTALLATION_ID": installation_id(), "REDIS_URL": redis_url}


def undumpable() -> None:
    """Make this process non-dumpable: a process of another user, or of the same user but without CAP_SYS_PTRACE (a
    packaged crawl's child in a worker not run as root), can then no longer read its /proc/<pid>/environ or memory,
    which hold the worker's secrets. Inherited by processes it forks, reset by exec. Linux only; elsewhere a no-op."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
