"""`item.changed` webhooks: once a job's items are stored (at its end), one event per watch and per item whose
changes in that job meet one of the watch's rules. Stored, signed and retried by callbacks like every Trawl webhook;
the dedupe key (item, job, watch) makes a second call for the same job emit nothing again."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.conf import settings
from django.db.models import Q

from access.tenancy import requester_tenant_id
from callbacks.models import EventType
from callbacks.services import event_emit
from items.history.record import history_enabled, job_history_prune
from items.history.rules import rule_matches
from items.models import ChangeWatch, Item, ItemFieldChange


def job_watches(*, source_id: int | None, tenant_id: int) -> list[ChangeWatch]:
    """The enabled watches a job's changes go to: its source's, and those of the requesters whose items they are."""
    scope = Q(source__isnull=True) | (Q(source_id=source_id) if source_id else Q(pk__in=[]))
    watches = ChangeWatch.objects.filter(scope, enabled=True).select_related("requester")
    return [w for w in watches if w.source_id or requester_tenant_id(w.requester) == tenant_id]


def job_history_followup(*, job_id: object, source_id: int | None, tenant_id: int) -> int:
    """What follows a job's end for its items' history: each changed item's bound kept, then the `item.changed`
    events of its watches. Returns how many events were new."""
    if history_enabled():
        job_history_prune(job_id=job_id)
    return item_changed_events_emit(job_id=job_id, source_id=source_id, tenant_id=tenant_id)


def item_changed_events_emit(*, job_id: object, source_id: int | None, tenant_id: int) -> int:
    """Emit the job's `item.changed` events; returns how many were new. Volatile changes never count."""
    watches = job_watches(source_id=source_id, tenant_id=tenant_id)
    if not watches:
        return 0
    changes: dict[int, list[dict[str, Any]]] = defaultdict(list)
    rows = ItemFieldChange.objects.filter(job_id=job_id, volatile=False).order_by("item_id", "pk")
    for item_id, field, kind, old, new in rows.values_list("item_id", "field", "kind", "old", "new"):
        changes[item_id].append({"field": field, "kind": kind, "old": old, "new": new})
    items = Item.objects.filter(pk__in=list(changes)).values_list("pk", "fingerprint", "url")
    emitted = 0
    for item_id, fingerprint, url in items:
        for watch in watches:
            matched = [rule for rule in watch.rules if rule_matches(rule, changes[item_id])]
            if matched and _emit(watch, job_id, source_id, (item_id, fingerprint, url), changes[item_id], matched):
                emitted += 1
    return emitted


def _emit(watch: ChangeWatch, job_id, source_id, item: tuple, changes: list, matched: list) -> bool:
    item_id, fingerprint, url = item
    base = settings.TRAWL_WEBHOOK_LINK_BASE_URL.rstrip("/")
    data = {
        "item": {"id": item_id, "fingerprint": fingerprint, "url": url},
        "job": {"id": str(job_id), "items_url": f"{base}/api/jobs/{job_id}/items/"},
        "source_id": source_id,
        "watch": watch.pk,
        "changes": changes,
        "matched": matched,
        "changes_url": f"{base}/api/items/{item_id}/changes/",
    }
    delivery = event_emit(
        event=EventType.ITEM_CHANGED,
        dedupe_key=f"item:{item_id}:{job_id}:{watch.pk}",
        target_url=watch.target_url,
        data=data,
        requester_id=watch.requester_id,
        job_id=job_id,
    )
    return delivery is not None
