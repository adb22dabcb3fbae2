"""A job's items upserted the way a crawl stores them: its own ids and its tenant, looked up from its requester."""

from __future__ import annotations

from collections import Counter
from typing import Any

from access.tenancy import job_tenant_id
from crawls.models import CrawlJob
from items.services import items_upsert


def job_items_upsert(*, job: CrawlJob, items: list[dict[str, Any]]) -> Counter:
    tenant_id = job_tenant_id(requester_id=job.requester_id)
    return items_upsert(
        job_id=job.pk, scraper_id=job.scraper_id, tenant_id=tenant_id, items=items, source_id=job.source_id
    )
