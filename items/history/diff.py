"""Two jobs compared item by item, each as it stored its items: added, removed, and the fields that moved."""

from __future__ import annotations

from typing import Any

from items.history.fields import fields_diff
from items.history.volatility import is_volatile
from items.models import ItemSighting
from items.selectors import job_items_seen


def jobs_diff(*, job_a: object, job_b: object, volatile: set[str] = frozenset()) -> dict[str, Any]:
    """What changed from job `a`'s items to job `b`'s: items only `b` saw (added), only `a` saw (removed), and, for
    items both saw, each field whose value differs (`volatile` fields left out), by item id."""
    before = dict(_seen(job_a))
    added, changed = [], []
    for item_id, (sighting, data) in _seen(job_b):
        if item_id not in before:
            added.append(_ref(sighting))
            continue
        fields = [
            {"field": change.field, "kind": change.kind, "old": change.old, "new": change.new}
            for change in fields_diff(before.pop(item_id)[1], data)
            if not is_volatile(change.field, volatile)
        ]
        if fields:
            changed.append({**_ref(sighting), "fields": fields})
    removed = [_ref(sighting) for sighting, _ in before.values()]
    return {"a": str(job_a), "b": str(job_b), "added": added, "removed": removed, "changed": changed}


def _seen(job_id: object):
    for sighting, data in job_items_seen(job_id=job_id):
        yield sighting.item_id, (sighting, data)


def _ref(sighting: ItemSighting) -> dict[str, Any]:
    item = sighting.item
    return {"id": item.pk, "fingerprint": item.fingerprint, "url": item.url}
