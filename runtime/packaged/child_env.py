"""What a packaged version's child process is given: an environment and settings built from allow-lists.

The child runs code uploaded with the package, which a requester's crawl drives: it is treated as hostile. It gets
none of the worker's secrets — no database URL, no SECRET_KEY, no broker or result-backend URL, no metrics token, no
cloud credentials — because its environment is made of the few variables named here, never `os.environ` minus what
looks secret (a secret added to the worker's environment tomorrow would leak). Its Django settings are
project.settings_child: no database, a throwaway SECRET_KEY, and the values of the parent's settings that Trawl's
code in the child reads (runtime.settings.compose's child_settings), sent as JSON in TRAWL_CHILD_SETTINGS.
The Redis URL it gets is its own (runtime.packaged.child_redis).
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

from project.env import BASE_DIR

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
PR_SET_DUMPABLE = 4  # prctl(2)


def child_environment(
    *, channel_fd: int, redis_url: str, idle_seconds: float, child_settings: dict[str, Any]
) -> dict[str, str]:
    """The child's whole environment: CHILD_ENV's variables the worker has, and the child's own: its Django settings
    (`child_settings`, runtime.settings.compose's child_settings, with the Redis URL meant for it) and how
    long it waits for a crawl before it exits."""
    variables = {name: os.environ[name] for name in CHILD_ENV if name in os.environ}
    return {
        **variables,
        # Trawl's code first, then the package's environment (its site-packages, then Trawl's via a .pth).
        "PYTHONPATH": str(BASE_DIR),
        "DJANGO_SETTINGS_MODULE": "project.settings_child",
        "TRAWL_CHILD_FD": str(channel_fd),
        "TRAWL_CHILD_IDLE_SECONDS": str(idle_seconds),
        "TRAWL_CHILD_SETTINGS": json.dumps({**child_settings, "REDIS_URL": redis_url}, default=str),
    }


def undumpable() -> None:
    """Make this process non-dumpable: a process of another user, or of the same user but without CAP_SYS_PTRACE (a
    packaged crawl's child in a worker not run as root), can then no longer read its /proc/<pid>/environ or memory,
    which hold the worker's secrets. Inherited by processes it forks, reset by exec. Linux only; elsewhere a no-op."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
