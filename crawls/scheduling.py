"""Scheduling rules as pure functions: no I/O, so they are easy to reason about and test."""

from __future__ import annotations

BROKER_PRIORITY_STEPS = 10  # matches broker_transport_options["priority_steps"] in celeryconfig


def broker_priority(priority: int) -> int:
    """Map Trawl priority 1..100 (100 most urgent) onto Redis priority steps 0..9 (0 most urgent)."""
    clamped = min(max(int(priority), 1), 100)
    return (BROKER_PRIORITY_STEPS - 1) - round((clamped - 1) * (BROKER_PRIORITY_STEPS - 1) / 99)
