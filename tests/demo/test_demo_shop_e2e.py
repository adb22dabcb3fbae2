"""`make run`'s demo, for real: serve the shop, seed, crawl the hub with a worker process, get every product."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from demo.generate import catalogue, generate_site
from demo.serve import DemoServer

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SHOP = {"categories": 2, "products_per_category": 7, "per_page": 3}
PRODUCTS = {p.sku: p for c in catalogue(categories=2, products_per_category=7) for p in c.products}


@pytest.fixture
def demo_shop(tmp_path):
    with DemoServer(tmp_path / "site") as server:
        generate_site(server.root, server.url, **SHOP)
        yield server


def crawl_hub(api, job_waiter, url: str, **spec) -> tuple[dict, dict[str, dict]]:
    response = api.post("/api/jobs/", {"url": f"{url}/index.html", "scraper": "demo_shop", **spec}, format="json")
    assert response.status_code == 201, response.content
    job = job_waiter(response.json()["id"])
    assert job.status == "succeeded", job.error_message
    rows = api.get(f"/api/jobs/{job.pk}/items/?limit=100").json()["results"]
    return api.get(f"/api/jobs/{job.pk}/").json(), {row["data"]["sku"]: row["data"] for row in rows}


def test_demo_shop_job_on_the_hub_finds_every_product(api, demo_shop, job_waiter, tmp_path):
    out = io.StringIO()
    call_command("seed_demo", base_url=demo_shop.url, credentials=tmp_path / "credentials.json", stdout=out)
    assert json.loads(out.getvalue())["api_token"]

    detail, items = crawl_hub(api, job_waiter, demo_shop.url)
    canary_detail, canary_items = crawl_hub(api, job_waiter, demo_shop.url, variant="canary")

    assert set(items) == set(PRODUCTS)
    assert {sku: item["price"] for sku, item in items.items()} == {sku: p.price for sku, p in PRODUCTS.items()}
    assert all(item["image"] == f"{demo_shop.url}/img/{sku}.svg" for sku, item in items.items())
    assert detail["stats"]["status_codes"] == {"200": 1 + 2 * 3 + 14}  # hub, 3 list pages per category, products
    # 90/10 routing may pick either version for the first job; only the canary reports stock.
    assert all(("in_stock" in item) == (detail["version"] == "1.1.0") for item in items.values())
    assert canary_detail["version"] == "1.1.0"
    assert {sku: item["in_stock"] for sku, item in canary_items.items()} == {
        sku: p.in_stock for sku, p in PRODUCTS.items()
    }


def test_the_readme_rendering_job_finds_the_script_built_products_only_when_rendered(
    api, builtins, demo_shop, job_waiter
):
    """README's rendering example, as it is written there, and the same job with `render: false`."""
    from demo.generate import new_arrivals
    from tests.e2e.test_readme import snippet

    _, text = snippet('{"url": "http://127.0.0.1:8001/new/index.html"')
    spec = json.loads(text.replace("http://127.0.0.1:8001", demo_shop.url))
    found = {}
    for render in (False, True):
        response = api.post("/api/jobs/", {**spec, "options": {**spec["options"], "render": render}}, format="json")
        assert response.status_code == 201, response.content
        job = job_waiter(response.json()["id"])
        assert job.status == "succeeded", job.error_message
        rows = api.get(f"/api/jobs/{job.pk}/items/?limit=100").json()["results"]
        found[render] = ({(row["data"]["title"], row["data"]["price"]) for row in rows}, job.stats["render"])

    arrivals = new_arrivals(catalogue(categories=2, products_per_category=7))  # SHOP
    assert found[False] == (set(), {"pages": 0, "seconds": 0.0, "subrequests_blocked": 0})
    assert found[True][0] == {(p.title, p.price) for p in arrivals} and len(arrivals) == 4
    assert found[True][1]["pages"] == 1 and found[True][1]["seconds"] > 0
