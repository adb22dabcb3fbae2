"""One signed webhook POST and what came of it. Never raises for anything the network or receiver does."""

from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from callbacks.payloads import body_bytes
from callbacks.signing import signature_header
from project.net import guard_enabled, private_target_reason

USER_AGENT = "Trawl-Webhooks/0.1"
SNIPPET_BYTES = 300


@dataclass(frozen=True)
class PostResult:
    status_code: int | None
    error: str
    duration_ms: int

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirect is a failed delivery: following it would resend a signed body to a URL nobody configured.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_opener = urllib.request.build_opener(_NoRedirect)


def post_signed(*, url: str, payload: dict, headers: dict[str, str], secret: str, timeout: float) -> PostResult:
    body = body_bytes(payload)
    all_headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT, **headers}
    if secret:
        # Signed at send time: the timestamp is this attempt's, so receivers can refuse stale replays.
        all_headers["X-Trawl-Signature"] = signature_header(secret=secret, body=body)
    request = urllib.request.Request(url, data=body, headers=all_headers, method="POST")
    started = time.monotonic()
    # Checked at every attempt, not only at submission: a name may have been pointed at an internal host since.
    refused = private_target_reason(url) if guard_enabled() else ""
    if refused:
        return PostResult(status_code=None, error=f"refused: {refused}", duration_ms=0)
    status_code, error = None, ""
    try:
        with _opener.open(request, timeout=timeout) as response:
            status_code = response.status
            response.read(SNIPPET_BYTES)
    except urllib.error.HTTPError as exc:
        status_code = exc.code
        error = f"HTTP {exc.code}: {_snippet(exc)}"
    except urllib.error.URLError as exc:
        error = f"{type(exc.reason).__name__}: {exc.reason}"
    except (OSError, http.client.HTTPException, ValueError) as exc:
        error = f"{type(exc).__name__}: {exc}"
    duration_ms = int((time.monotonic() - started) * 1000)
    return PostResult(status_code=status_code, error=error, duration_ms=duration_ms)


def _snippet(exc: urllib.error.HTTPError) -> str:
    try:
        return exc.read(SNIPPET_BYTES).decode(errors="replace").strip() or exc.reason
    except (OSError, http.client.HTTPException):
        return str(exc.reason)
