"""A batch's life: the one module that writes `Batch.status` (and the fields that move with it), as
crawls.services.lifecycle is for a job's.

    create ──▶ pending ──launch──▶ running ──end──▶ completed
                  │                   │
                  └──────cancel───────┴──▶ cancelled ──end──▶ cancelled (finished)

A batch is open until `finished_at` is set; `end` sets it exactly once. Every move is a compare-and-set from the
states its caller may have seen (`batch_transition`), so the chord body, its error callback, the sweeper, a batch's
last job and a cancel may race in any order and each learns from the count whether it moved the batch.
Launching, finalizing and sweeping are crawls.services.batch_runs; creating and cancelling call here too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Case, QuerySet, Value, When
from django.utils import timezone

from access.models import Requester
from crawls.models import Batch, BatchStatus

OPEN_STATUSES = (BatchStatus.PENDING, BatchStatus.RUNNING, BatchStatus.CANCELLED)


def batch_transition(batches: QuerySet[Batch], *, expected: str | Iterable[str], **fields: Any) -> int:
    """Move the open batches of `batches` still in `expected`; return how many moved."""
    expected = (expected,) if isinstance(expected, str) else tuple(expected)
    return batches.filter(status__in=expected, finished_at__isnull=True).update(**fields)


def batch_open(*, requester: Requester | None, name: str, priority: int, callback_url: str, total: int) -> Batch:
    """The batch's row, `pending` until its launcher publishes the chord."""
    return Batch.objects.create(
        requester=requester,
        name=name,
        priority=priority,
        callback_url=callback_url,
        total=total,
        status=BatchStatus.PENDING,
    )


def batch_launched(*, batch_id: object) -> bool:
    """pending → running, once its chord is published (a cancelled batch stays cancelled)."""
    return bool(
        batch_transition(Batch.objects.filter(pk=batch_id), expected=BatchStatus.PENDING, status=BatchStatus.RUNNING)
    )


def batch_cancelled(*, batch_id: object) -> bool:
    """An open batch → cancelled; it ends `cancelled` once its last job has."""
    return bool(
        batch_transition(Batch.objects.filter(pk=batch_id), expected=OPEN_STATUSES, status=BatchStatus.CANCELLED)
    )


def batch_end(*, batch_id: object, totals: dict[str, int]) -> bool:
    """Close the batch with its totals: `cancelled` if a cancel was asked, else `completed`. True only for the one
    caller that closed it."""
    # The status is decided in the same statement, so a cancel racing this update is never lost.
    final_status = Case(
        When(status=BatchStatus.CANCELLED, then=Value(BatchStatus.CANCELLED.value)),
        default=Value(BatchStatus.COMPLETED.value),
    )
    return bool(
        batch_transition(
            Batch.objects.filter(pk=batch_id),
            expected=OPEN_STATUSES,
            status=final_status,
            totals=totals,
            finished_at=timezone.now(),
        )
    )
