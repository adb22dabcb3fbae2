"""The envelope and bytes of webhook events, per the contract in docs/architecture.md. Built once, stored, resent
unchanged. What an event says about a job or a batch is built by crawls (crawls/webhooks.py), which owns them."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any


def iso_time(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def envelope(*, event_id: object, event: str, created_at: datetime, data: dict[str, Any]) -> dict[str, Any]:
    return {"id": str(event_id), "event": event, "created_at": iso_time(created_at), "data": data}


def body_bytes(payload: dict[str, Any]) -> bytes:
    """The exact bytes sent and signed. Deterministic, so every retry carries the same body."""
    return json.dumps(payload, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()
