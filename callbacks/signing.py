"""`X-Trawl-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">` with the requester's webhook secret.

The timestamp is signed with the body so a captured request cannot be replayed later; receivers check both.
"""

from __future__ import annotations

import hashlib
import hmac
import time

DEFAULT_TOLERANCE_SECONDS = 300


def signature(*, secret: str, body: bytes, timestamp: int) -> str:
    message = f"{timestamp}.".encode() + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_header(*, secret: str, body: bytes, timestamp: int | None = None) -> str:
    timestamp = int(time.time()) if timestamp is None else timestamp
    return f"t={timestamp},v1={signature(secret=secret, body=body, timestamp=timestamp)}"


def signature_verify(
    *, secret: str, body: bytes, header: str, tolerance: int = DEFAULT_TOLERANCE_SECONDS, now: float | None = None
) -> bool:
    """What a receiver does: parse the header, recompute, compare in constant time, refuse stale timestamps."""
    parts = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    expected = signature(secret=secret, body=body, timestamp=timestamp)
    return hmac.compare_digest(expected, parts.get("v1", ""))
