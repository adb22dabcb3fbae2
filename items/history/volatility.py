"""Volatile fields: those that change on most runs of their source (a timestamp, a rotating banner, a view counter).

Each run of a source tallies, chunk by chunk, how many items it saw that were stored before (`seen`) and on how many
of them each field moved (`changed`). A run *moved* a field when it changed on at least TRAWL_VOLATILE_SHARE of those
items; a field is volatile when TRAWL_VOLATILE_MIN_RUNS of the source's last TRAWL_VOLATILE_RUNS runs (this one
included, as far as it got) moved it. With the defaults (0.5, 2 of 3), a field rotated on every visit is volatile by
the third run, and a catalog where 3 % of prices move never makes `price` volatile.

A source's `always` and `never` lists override what the runs found. A volatile field's change is still recorded (the
job's view of its items needs it) but flagged, makes no item "changed" and sends no `item.changed`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from items.models import SourceVolatility, volatile_effective


def runs_tally(runs: list[dict[str, Any]], *, job_id: str, seen: int, changed: Counter) -> list[dict[str, Any]]:
    """The runs with this chunk's counts added to its job's run (a new run when the job is not the last one)."""
    runs = [dict(run) for run in runs]
    if runs and runs[-1].get("job") == job_id:
        run = runs[-1]
    elif seen:
        run = {"job": job_id, "seen": 0, "changed": {}}
        runs.append(run)
    else:  # a run that has seen no stored item yet (a first crawl) says nothing about any field
        return runs
    run["seen"] = run.get("seen", 0) + seen
    run["changed"] = dict(Counter(run.get("changed") or {}) + changed)
    return runs[-settings.TRAWL_VOLATILE_RUNS :]


def fields_volatile(runs: list[dict[str, Any]]) -> list[str]:
    """The fields that moved on at least TRAWL_VOLATILE_MIN_RUNS of the runs (see the module's docstring)."""
    moved: Counter = Counter()
    for run in runs[-settings.TRAWL_VOLATILE_RUNS :]:
        seen = run.get("seen") or 0
        for field, count in (run.get("changed") or {}).items():
            if seen and count / seen >= settings.TRAWL_VOLATILE_SHARE:
                moved[field] += 1
    return sorted(field for field, runs_moved in moved.items() if runs_moved >= settings.TRAWL_VOLATILE_MIN_RUNS)


def is_volatile(field: str, volatile: set[str]) -> bool:
    """`sections.Pricing` is volatile when it or its dict (`sections`) is."""
    return field in volatile or field.split(".", 1)[0] in volatile


def volatile_with_chunk(state: SourceVolatility, *, job_id: object, seen: int, changed: Counter) -> set[str]:
    """The fields volatile for the source once this chunk's tally is counted (overrides applied), from its state as
    read without a lock: the chunk's items are judged by it; `source_volatility_count` stores the tally."""
    observed = fields_volatile(runs_tally(state.runs, job_id=str(job_id), seen=seen, changed=changed))
    return set(volatile_effective(observed=observed, always=state.always, never=state.never))


def source_volatility_count(state: SourceVolatility, *, job_id: object, seen: int, changed: Counter) -> None:
    """Add a chunk's tally to its source's runs, as the last write of the chunk's transaction (the row stays locked
    until the commit, and nothing is waited for while holding it). One UPDATE when nobody counted since `state` was
    read; else (another shard's chunk, or the source's first tally) merged under the row's lock."""
    if not seen:
        return
    runs = runs_tally(state.runs, job_id=str(job_id), seen=seen, changed=changed)
    if state.pk is not None:
        unchanged_since = SourceVolatility.objects.filter(pk=state.pk, updated_at=state.updated_at)
        if unchanged_since.update(runs=runs, observed=fields_volatile(runs), updated_at=timezone.now()):
            return
    state, _ = SourceVolatility.objects.select_for_update().get_or_create(source_id=state.source_id)
    state.runs = runs_tally(state.runs, job_id=str(job_id), seen=seen, changed=changed)
    state.observed = fields_volatile(state.runs)
    state.save(update_fields=["runs", "observed", "updated_at"])


def source_volatile_fields(*, source_id: int | None) -> set[str]:
    """The fields volatile for a source now (overrides applied), without counting anything."""
    state = SourceVolatility.objects.filter(source_id=source_id).first() if source_id else None
    return set(state.effective) if state else set()


def source_volatility(*, source_id: int) -> SourceVolatility:
    """The source's state, or an unsaved empty one when none of its runs counted anything yet."""
    return SourceVolatility.objects.filter(source_id=source_id).first() or SourceVolatility(source_id=source_id)


@transaction.atomic
def source_volatility_override(*, source_id: int, always: list[str], never: list[str]) -> SourceVolatility:
    """Set a source's overrides: `always` volatile, `never` volatile, whatever its runs found."""
    state, _ = SourceVolatility.objects.select_for_update().get_or_create(source_id=source_id)
    state.always, state.never = sorted(set(always)), sorted(set(never))
    state.save(update_fields=["always", "never", "updated_at"])
    return state
