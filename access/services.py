"""Issuing and checking API tokens."""

from __future__ import annotations

import hashlib
import secrets

from django.db import transaction

from access.models import ApiToken, Requester
from access.tenancy import SYSTEM_TENANT


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _token_new() -> str:
    # One token in 64 would start with "-": `manage.py deploy --token -Xy...` (or any argparse option) then reads it
    # as an option and the user sees "expected one argument". Draw again rather than change the alphabet.
    while (token := secrets.token_urlsafe(32)).startswith("-"):
        pass
    return token


@transaction.atomic
def token_issue(
    *, requester_name: str, admin: bool = False, max_active_jobs: int | None = None
) -> tuple[Requester, str]:
    """Create the requester if needed and a new token for it. The plain token exists only in the return value.
    `max_active_jobs`, when given, becomes the requester's cap on queued + running jobs (0 and up)."""
    if requester_name == SYSTEM_TENANT:
        from project.errors import TrawlError  # not at import time: DRF loads this module while project.errors loads

        raise TrawlError(f"{SYSTEM_TENANT} is the system tenant (admin and scheduled work): it has no tokens")
    requester, created = Requester.objects.get_or_create(
        name=requester_name, defaults={"is_admin": admin, "webhook_secret": secrets.token_hex(32)}
    )
    if not created and admin and not requester.is_admin:
        requester.is_admin = True
        requester.save(update_fields=["is_admin"])
    if max_active_jobs is not None:
        requester.max_active_jobs = max_active_jobs
        requester.save(update_fields=["max_active_jobs"])
    token = _token_new()
    ApiToken.objects.create(requester=requester, key_hash=token_hash(token), prefix=token[:8])
    return requester, token


def token_authenticate(*, token: str) -> Requester | None:
    api_token = (
        ApiToken.objects.select_related("requester").filter(key_hash=token_hash(token), revoked_at__isnull=True).first()
    )
    return api_token.requester if api_token else None
