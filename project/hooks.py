"""Hooks: how a lower app lets higher apps hear of something without importing them (crawls/hooks.py,
catalog/hooks.py). A hook is a list of receivers; each higher app subscribes in its AppConfig.ready()."""

from __future__ import annotations

from typing import TypeVar

Receiver = TypeVar("Receiver")


def subscribe_once(hook: list[Receiver], receiver: Receiver) -> Receiver:
    """Adds `receiver` to `hook` unless it is there: ready() may run twice (a test re-populating apps)."""
    if receiver not in hook:
        hook.append(receiver)
    return receiver
