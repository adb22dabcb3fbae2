"""Tenants: whose data an item is. A requester's own jobs make its items; work an admin submits and work beat
schedules (no requester) belongs to the system tenant, a requester named `trawl-system` that admins see through and
nobody else does. Two requesters crawling the same page therefore get two items, each seeing only its own."""

from __future__ import annotations

import secrets

from access.models import Requester

SYSTEM_TENANT = "trawl-system"


def system_tenant() -> Requester:
    tenant, _ = Requester.objects.get_or_create(
        name=SYSTEM_TENANT, defaults={"is_admin": False, "webhook_secret": secrets.token_hex(32)}
    )
    return tenant


def requester_tenant_id(requester: Requester | None) -> int:
    """The tenant whose data a requester's submissions produce."""
    if requester is None or requester.is_admin:
        return system_tenant().pk
    return requester.pk


def job_tenant_id(*, requester_id: int | None) -> int:
    """The tenant of a job submitted by this requester (None: beat's or an admin's work)."""
    return requester_tenant_id(Requester.objects.get(pk=requester_id) if requester_id else None)
