"""Schema-driven fuzzing of the REST API (schemathesis over our own OpenAPI, /api/schema/).

Every operation gets generated valid and invalid input, as a plain requester and as an admin. No answer may be a
5xx, and a plain requester's answers never contain another requester's job or batch ids.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from crawls.models import Batch, CrawlJob
from items.models import Item, ItemSighting
from registry.models import Scraper

pytestmark = pytest.mark.django_db

FUZZ = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _load_schema():
    from project.wsgi import application

    return schemathesis.openapi.from_wsgi("/api/schema/", application)


schema = _load_schema()


@pytest.fixture(autouse=True)
def _keep_connection():
    """Like Django's test client: an in-process request must not close the test's database connection."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def tokens(db, builtins):
    """alice and an admin fuzz; bob owns jobs, a batch and an item (on bob.test) none of alice's answers may show."""
    from access.services import token_issue

    _, alice = token_issue(requester_name="alice")
    _, admin = token_issue(requester_name="root", admin=True)
    bob, _ = token_issue(requester_name="bob")
    link = Scraper.objects.get(name="link")
    batch = Batch.objects.create(requester=bob, name="bobs", total=1)
    secrets = [str(batch.pk)]
    secrets.append(str(CrawlJob.objects.create(url="http://bob.test/", scraper=link, requester=bob, batch=batch).pk))
    job = CrawlJob.objects.create(url="http://bob.test/x", scraper=link, requester=bob)
    item = Item.objects.create(scraper=link, fingerprint="bobs", url="http://bob.test/secret-item", content_hash="h")
    ItemSighting.objects.create(job=job, item=item, change="new")
    secrets += [str(job.pk), "bob.test"]
    return {"alice": alice, "admin": admin, "bob_ids": secrets}


def call(case, token: str):
    response = case.call(headers={"Authorization": f"Token {token}"})
    assert response.status_code < 500, f"{case.method} {case.formatted_path} -> {response.status_code}: {case.body!r}"
    return response


@schema.parametrize()
@FUZZ
def test_a_requester_never_gets_a_5xx_nor_another_requesters_ids(case, tokens):
    response = call(case, tokens["alice"])

    leaked = [value for value in tokens["bob_ids"] if value in response.text]
    assert not leaked, f"{case.method} {case.formatted_path} showed bob's {leaked}"


@schema.parametrize()
@FUZZ
def test_an_admin_never_gets_a_5xx(case, tokens):
    call(case, tokens["admin"])
