"""Schema-driven fuzzing of the REST API (schemathesis over our own OpenAPI, /api/schema/).

Every operation gets generated valid and invalid input, as each of two plain requesters and as an admin. No answer
may be a 5xx, and a requester's answers never contain the other requester's job, batch or item ids, domains or item
data.
"""

from __future__ import annotations

import io
import json

import pyarrow.parquet as pq
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


def _world_of(name: str, link: Scraper) -> tuple[object, str, list[str]]:
    """A requester with a batch, two jobs and an item whose data holds a secret: (requester, token, its secrets)."""
    from access.services import token_issue

    requester, token = token_issue(requester_name=name)
    batch = Batch.objects.create(requester=requester, name=f"{name}s", total=1)
    in_batch = CrawlJob.objects.create(url=f"http://{name}.test/", scraper=link, requester=requester, batch=batch)
    job = CrawlJob.objects.create(url=f"http://{name}.test/x", scraper=link, requester=requester)
    item = Item.objects.create(
        tenant=requester,
        scraper=link,
        fingerprint=f"{name}s",
        url=f"http://{name}.test/secret-item",
        data={"owner_secret": f"{name}-secret-data"},
        content_hash="h",
        last_job=job,
    )
    ItemSighting.objects.create(job=job, item=item, change="new")
    secrets = [str(batch.pk), str(in_batch.pk), str(job.pk), f"{name}.test", f"{name}-secret-data"]
    return requester, token, secrets


@pytest.fixture
def tokens(db, builtins):
    """alice and bob each own jobs, a batch and an item; each fuzzes, and neither may ever see the other's."""
    from access.services import token_issue

    link = Scraper.objects.get(name="link")
    _, alice, alice_secrets = _world_of("alice", link)
    _, bob, bob_secrets = _world_of("bob", link)
    _, admin = token_issue(requester_name="root", admin=True)
    return {"alice": (alice, bob_secrets), "bob": (bob, alice_secrets), "admin": admin}


def call(case, token: str):
    response = case.call(headers={"Authorization": f"Token {token}"})
    assert response.status_code < 500, f"{case.method} {case.formatted_path} -> {response.status_code}: {case.body!r}"
    return response


def shown_text(response) -> str:
    """What an answer shows, as text: a Parquet export (binary, compressed) read back into its rows."""
    if response.content[:4] == b"PAR1":
        return json.dumps(pq.read_table(io.BytesIO(response.content)).to_pylist(), default=str)
    return response.text


@schema.parametrize()
@FUZZ
@pytest.mark.parametrize("who", ["alice", "bob"])
def test_a_requester_never_gets_a_5xx_nor_another_requesters_ids_or_data(case, tokens, who):
    token, others = tokens[who]
    response = call(case, token)

    leaked = [value for value in others if value in shown_text(response)]
    assert not leaked, f"{case.method} {case.formatted_path} showed {who} the other requester's {leaked}"


@schema.parametrize()
@FUZZ
def test_an_admin_never_gets_a_5xx(case, tokens):
    call(case, tokens["admin"])
