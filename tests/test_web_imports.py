"""A web process serves the API without loading the crawl executor: no crochet, no reactor thread, no executor."""

from __future__ import annotations

import os

import pytest
from django.conf import settings

from crawls.models import CrawlJob
from tests import workers

# Loads the WSGI app, POSTs a job through it, and reports which crawl-runtime modules were imported by then.
PROBE = """
import json, sys
from project.wsgi import application
from django.test import Client

response = Client(HTTP_HOST="127.0.0.1").post(
    "/api/jobs/", {"url": "http://shop.test/", "scraper": "link"}, content_type="application/json",
    HTTP_AUTHORIZATION="Token " + sys.argv[1],
)
runtime = ("crochet", "crawls.services.execution", "runtime.bridge.runner", "crawls.tasks")
loaded = [name for name in sys.modules if name.startswith(runtime)]
print(json.dumps({"status": response.status_code, "id": response.json().get("id"), "loaded": sorted(loaded)}))
"""


@pytest.mark.django_db(transaction=True)
def test_serving_post_api_jobs_imports_neither_crochet_nor_the_executor(requester, builtins):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": workers.test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
    }
    probe = workers.script_run(PROBE, requester.plain_token, env=env)
    assert probe.returncode == 0, probe.stderr
    answer = workers.last_json_line(probe)

    assert answer["status"] == 201, probe.stderr
    assert CrawlJob.objects.filter(pk=answer["id"]).exists()  # the job really was created and published
    assert answer["loaded"] == []
