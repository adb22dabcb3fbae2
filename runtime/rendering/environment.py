"""The environment of the helpers a rendering worker starts — Playwright's Node.js driver and Chromium — and how
Chromium is launched: neither may carry the worker's secrets, and Chromium runs sandboxed where it can.

Playwright starts its driver with a copy of the worker's whole environment (`get_driver_env`, called by its pipe
transport). `exec` resets the dumpable flag, so `/proc/<driver>/environ` — DATABASE_URL, SECRET_KEY, the broker's
URL — was readable by any process of the worker's uid (a packaged version's child, say). The driver gets an
allow-listed environment instead (`driver_env`), built from the transport's own call, so the worker's `os.environ`
is never changed for its other threads; Chromium gets the same list and the name of its binary (`chromium_env`).

`chromium_args`: Chromium refuses its sandbox as root, so `--no-sandbox` is passed only when the worker runs as root
(production should not: docs/rendering.md). WebRTC sends no UDP that does not go through a proxy (STUN/TURN from a
requester's page would otherwise reach any address around the guard proxy).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

# What Node.js and Chromium need to run, find fonts and locale data, and write temporary files: none is a secret.
ALLOWED_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TEMP",
        "TMP",
        "XDG_RUNTIME_DIR",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "FONTCONFIG_PATH",
        "FONTCONFIG_FILE",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "NODE_EXTRA_CA_CERTS",
    }
)
# Locale categories (LC_ALL, LC_CTYPE ...); Playwright's own (PW_LANG_NAME ... set by get_driver_env, and the
# operator's PLAYWRIGHT_* switches).
ALLOWED_PREFIXES = ("LC_", "PW_", "PLAYWRIGHT_")
BINARY_NAME = "TRAWL_CHROMIUM_BINARY"  # read by chromium_launch.py

# What Chromium needs on a headless server worker (no GPU, no display) and what keeps it from phoning home.
CHROMIUM_ARGS = (
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-breakpad",
    "--disable-dev-shm-usage",
    # WebRTC: no UDP but through a proxy (and Trawl's proxies carry none), so a page's STUN/TURN packets never leave
    # the machine around the guard proxy. (Chromium 156 ignores the `--force-webrtc-ip-handling-policy` spelling:
    # measured, 10 STUN packets reached the listener with it; none with this one.)
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
)
NO_SANDBOX = "--no-sandbox"  # only as root, where Chromium refuses its sandbox


def allowed(environ: Mapping[str, str]) -> dict[str, str]:
    """The allow-listed part of `environ`."""
    return {
        name: value for name, value in environ.items() if name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)
    }


def driver_env(playwright_env: Mapping[str, str]) -> dict[str, str]:
    """The driver's environment: Playwright's (the worker's copy plus its PW_* names), allow-listed."""
    return allowed(playwright_env)


def chromium_env(binary: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Chromium's environment (Playwright passes exactly this one when given): allow-listed, and its binary's name."""
    return {**allowed(os.environ if environ is None else environ), BINARY_NAME: binary}


def chromium_args(euid: int | None = None) -> list[str]:
    """Chromium's switches: sandboxed unless the worker runs as root (euid 0), where Chromium refuses to start so."""
    euid = os.geteuid() if euid is None else euid
    return [*((NO_SANDBOX,) if euid == 0 else ()), *CHROMIUM_ARGS]


def driver_scrubbed() -> None:
    """Playwright's pipe transport starts the driver with `get_driver_env()`, looked up in its module when it starts
    one: from now on that lookup returns the allow-listed environment. Idempotent; the worker's os.environ is left
    as it is. Raises if Playwright no longer starts its driver this way (a silent leak is worse than no rendering)."""
    from playwright._impl import transport

    current = getattr(transport, "get_driver_env", None)
    if current is None:
        raise RuntimeError("playwright._impl.transport.get_driver_env is gone: the driver's environment is unchecked")
    if getattr(current, "trawl_scrubbed", False):
        return

    def scrubbed_driver_env() -> dict[str, Any]:
        return driver_env(current())

    scrubbed_driver_env.trawl_scrubbed = True  # type: ignore[attr-defined]
    transport.get_driver_env = scrubbed_driver_env
