"""Requesters and tokens: `manage.py issue_token` and what a token lets its holder do."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from access.models import ApiToken, Requester
from access.services import token_authenticate, token_issue
from access.tenancy import SYSTEM_TENANT

pytestmark = pytest.mark.django_db


def issue(*args: str) -> dict:
    out = io.StringIO()
    call_command("issue_token", *args, stdout=out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1, lines
    return json.loads(lines[0])


def test_issue_token_prints_one_json_line_with_requester_token_and_secret():
    line = issue("alice", "--admin")

    assert set(line) == {"requester", "token", "webhook_secret"}
    assert line["requester"] == "alice"
    assert len(line["token"]) >= 32
    assert len(line["webhook_secret"]) == 64
    assert Requester.objects.get(name="alice").is_admin


def test_issued_token_works_on_the_api():
    line = issue("alice")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {line['token']}")

    response = client.get("/api/jobs/")

    assert response.status_code == 200
    assert response.json()["count"] == 0


def test_requester_without_admin_flag_is_not_admin():
    issue("bob")

    assert not Requester.objects.get(name="bob").is_admin


def test_second_token_for_the_same_requester_keeps_the_first_working_and_the_secret():
    first, second = issue("alice"), issue("alice")

    assert first["token"] != second["token"]
    assert first["webhook_secret"] == second["webhook_secret"]
    assert token_authenticate(token=first["token"]).name == "alice"
    assert token_authenticate(token=second["token"]).name == "alice"
    assert Requester.objects.exclude(name=SYSTEM_TENANT).count() == 1  # besides the system tenant


def test_admin_flag_can_be_granted_later():
    issue("alice")
    issue("alice", "--admin")

    assert Requester.objects.get(name="alice").is_admin


def test_plain_token_is_never_stored():
    requester, token = token_issue(requester_name="alice")

    stored = ApiToken.objects.get(requester=requester)
    assert stored.key_hash != token
    assert token not in stored.key_hash
    assert stored.prefix == token[:8]


def test_unknown_and_revoked_tokens_authenticate_nobody():
    from django.utils import timezone

    requester, token = token_issue(requester_name="alice")
    assert token_authenticate(token="nope") is None

    requester.tokens.update(revoked_at=timezone.now())

    assert token_authenticate(token=token) is None


def test_malformed_authorization_header_is_401():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token two parts")

    assert client.get("/api/jobs/").status_code == 401


def test_a_token_never_starts_with_a_dash_so_command_lines_take_it_as_a_value(monkeypatch):
    import secrets

    drawn = iter(["-starts-like-an-option", "Ab-cd_ef"])
    monkeypatch.setattr(secrets, "token_urlsafe", lambda nbytes: next(drawn))

    _, token = token_issue(requester_name="dash")

    assert token == "Ab-cd_ef"
    assert token_authenticate(token=token).name == "dash"
