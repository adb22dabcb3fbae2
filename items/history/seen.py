"""The values a job stored: an item's current data walked back through the changes recorded after the job stored it.

A sighting's `seen_at` is when its job last stored the item; every field change recorded later (by later jobs) is
undone, newest first. Exact while the item's history since then is within its bound (TRAWL_ITEM_CHANGES_MAX); a
sighting from before field history (no `seen_at`) gives the current data. `_` keys (bookkeeping) are as stored now.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from items.history.fields import change_revert
from items.models import ItemFieldChange, ItemSighting


def sightings_data(sightings: Sequence[ItemSighting]) -> list[dict[str, Any]]:
    """Each sighting's item data as its job stored it (the sightings' items loaded), in one query for all of them."""
    times = [sighting.seen_at for sighting in sightings if sighting.seen_at is not None]
    later: dict[int, list[tuple]] = defaultdict(list)
    if times:
        rows = (
            ItemFieldChange.objects.filter(item_id__in={s.item_id for s in sightings}, changed_at__gt=min(times))
            .order_by("-changed_at", "-pk")
            .values_list("item_id", "changed_at", "path", "kind", "old")
        )
        for item_id, changed_at, path, kind, old in rows:
            later[item_id].append((changed_at, path, kind, old))
    return [_as_seen(sighting, later.get(sighting.item_id, ())) for sighting in sightings]


def _as_seen(sighting: ItemSighting, later: Sequence[tuple]) -> dict[str, Any]:
    data = dict(sighting.item.data or {})
    if sighting.seen_at is None:
        return data
    for changed_at, path, kind, old in later:  # newest first
        if changed_at > sighting.seen_at:
            change_revert(data, path=tuple(path), kind=kind, old=old)
    return data
