"""Recording a chunk's field changes in the upsert's transaction: diff the items whose content moved, count them into
their source's volatility, tell which really changed, store each field's old and new value, keep the bound."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from django.conf import settings

from items.history.fields import FieldChange, fields_diff
from items.history.volatility import (
    is_volatile,
    source_volatility,
    source_volatility_count,
    volatile_with_chunk,
)
from items.models import ItemFieldChange, SourceVolatility

FIELD_NAME_MAX = 500


def history_enabled() -> bool:
    return settings.TRAWL_ITEM_CHANGES_MAX > 0


class ChunkHistory:
    """The field changes of one chunk of one job (items_upsert): `diff` each moved item, `settle` once, `record`."""

    def __init__(self, *, job_id: object, source_id: int | None, now: datetime) -> None:
        self.job_id, self.source_id, self.now = job_id, source_id, now
        self.diffs: dict[str, list[FieldChange]] = {}
        self.volatile: set[str] = set()
        self.seen = 0
        self.state: SourceVolatility | None = None  # the source's volatility as read for this chunk

    def diff(self, fingerprint: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.diffs[fingerprint] = fields_diff(old, new)

    def settle(self, *, seen: int) -> set[str]:
        """Count the chunk into its source's runs (`seen`: items of the chunk stored before); the fingerprints whose
        item changed in a field that is not volatile: those, and only those, are "changed"."""
        self.seen = seen
        if self.source_id is not None:
            self.state = source_volatility(source_id=self.source_id)
            self.volatile = volatile_with_chunk(self.state, job_id=self.job_id, seen=seen, changed=self._tally())
        return {
            fingerprint
            for fingerprint, changes in self.diffs.items()
            if any(not is_volatile(change.field, self.volatile) for change in changes)
        }

    def record(self, *, ids: dict[str, int]) -> None:
        """Store the changes and count the chunk into its source's runs (last: it locks). Each item's bound is kept
        as the job ends (items.history.notify.job_history_followup), one query for the job, not one per chunk."""
        rows = [
            ItemFieldChange(
                item_id=ids[fingerprint],
                job_id=self.job_id,
                field=change.field[:FIELD_NAME_MAX],
                path=list(change.path),
                kind=change.kind,
                old=change.old,
                new=change.new,
                volatile=is_volatile(change.field, self.volatile),
                changed_at=self.now,
            )
            for fingerprint, changes in self.diffs.items()
            for change in changes
        ]
        ItemFieldChange.objects.bulk_create(rows, batch_size=500)
        if self.state is not None:
            source_volatility_count(self.state, job_id=self.job_id, seen=self.seen, changed=self._tally())

    def _tally(self) -> Counter:
        """On how many of the chunk's items each field moved."""
        return Counter(change.field for changes in self.diffs.values() for change in changes)


def job_history_prune(*, job_id: object) -> int:
    """Keep the latest TRAWL_ITEM_CHANGES_MAX changes of each item the job changed, of which at most
    TRAWL_ITEM_VOLATILE_CHANGES_MAX volatile ones (a field rotated on every visit must not push the real changes
    out; the extra volatile ones go first): one read, newest first, and one delete for all of them."""
    changed_items = ItemFieldChange.objects.filter(job_id=job_id).values("item_id")
    rows = (
        ItemFieldChange.objects.filter(item_id__in=changed_items)
        .order_by("item_id", "-changed_at", "-pk")
        .values_list("pk", "item_id", "volatile")
    )
    stale, kept, item = [], Counter(), None
    for pk, item_id, volatile in rows:
        if item_id != item:
            item, kept = item_id, Counter()
        if (
            volatile and kept[True] >= settings.TRAWL_ITEM_VOLATILE_CHANGES_MAX
        ) or kept.total() >= settings.TRAWL_ITEM_CHANGES_MAX:
            stale.append(pk)
        else:
            kept[volatile] += 1
    if not stale:
        return 0
    return ItemFieldChange.objects.filter(pk__in=stale).delete()[0]
