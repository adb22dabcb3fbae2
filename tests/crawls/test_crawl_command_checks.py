"""`manage.py crawl` checks a job with the serializer POST /api/jobs/ uses: it refuses what the API refuses, with the
same fields and messages, and creates nothing."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from crawls.models import CrawlJob
from project.web.serializers import errors_flat

pytestmark = pytest.mark.django_db

URL = "http://shop.test/list-1.html"
REFUSED = [
    {"maxdepth": 1000},
    {"maxdepth": "lots", "bogus": 1},
    {"allowed_domains": "shop.test"},
    {"allow_regex": ["(a)\\1"]},
]


def cli_refusal(*args: str) -> CommandError:
    with pytest.raises(CommandError) as refused:
        call_command("crawl", *args)
    return refused.value


@pytest.mark.parametrize("options", REFUSED)
def test_the_cli_refuses_the_options_the_api_refuses_with_the_same_messages(api, builtins, options):
    answer = api.post("/api/jobs/", {"url": URL, "options": options}, format="json")
    assert answer.status_code == 400, answer.content

    refusal = cli_refusal(URL, "--options", json.dumps(options))

    assert refusal.returncode == 2
    assert str(refusal).splitlines() == [f"{field}: {message}" for field, message in errors_flat(answer.json())]
    assert not CrawlJob.objects.exists()


def test_maxdepth_beyond_20_is_refused_naming_the_field(builtins):
    refusal = cli_refusal(URL, "--options", '{"maxdepth": 1000}')

    assert str(refusal) == "options.maxdepth: Ensure this value is less than or equal to 20."


def test_an_unknown_option_is_refused_not_ignored(builtins):
    refusal = cli_refusal(URL, "--options", '{"maxdepth": "lots", "bogus": 1}')

    assert str(refusal) == "options.bogus: Unknown field."


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["ftp://shop.test/"], "url"),
        ([URL, "--priority", "0"], "priority"),
        ([URL, "--variant", "nightly"], "variant"),
        ([URL, "--scraper", "no such scraper"], "scraper"),
        ([URL, "--options", "[1, 2]"], "options"),
        ([URL, "--options", "{not json"], "options"),
    ],
)
def test_the_other_flags_are_checked_as_the_api_checks_them(builtins, args, field):
    refusal = cli_refusal(*args)

    assert refusal.returncode == 2
    assert str(refusal).startswith(f"{field}"), str(refusal)
    assert not CrawlJob.objects.exists()


def test_a_good_job_is_created_as_the_api_creates_it(builtins, sent_tasks, capsys):
    call_command("crawl", URL, "--options", '{"maxdepth": 2, "allowed_domains": ["shop.test"]}', "--priority", "70")

    job = CrawlJob.objects.get()
    assert (job.url, job.scraper.name, job.priority) == (URL, "link", 70)
    assert job.options == {"maxdepth": 2, "allowed_domains": ["shop.test"]}
    assert capsys.readouterr().out.strip() == str(job.pk)


def test_a_refusal_of_no_field_prints_the_apis_message(builtins, requester, sent_tasks):
    requester.max_active_jobs = 1
    requester.save(update_fields=["max_active_jobs"])
    call_command("crawl", URL, "--requester", requester.name, stdout=io.StringIO())

    refusal = cli_refusal(URL, "--requester", requester.name)

    assert refusal.returncode == 2
    assert str(refusal).startswith("requester alice may have at most 1 active jobs"), str(refusal)
    assert CrawlJob.objects.count() == 1
