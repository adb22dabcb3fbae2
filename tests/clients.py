"""API clients authenticated as a requester, for tests."""

from __future__ import annotations

from rest_framework.test import APIClient

from access.services import token_issue


def client_for(name: str, *, admin: bool = False) -> APIClient:
    """A client whose requests carry a fresh token of requester `name` (created if new)."""
    _, token = token_issue(requester_name=name, admin=admin)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client
