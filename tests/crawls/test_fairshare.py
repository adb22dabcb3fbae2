"""Fair share: max_active_jobs refuses with 429; a crawl message is a slot that serves the owed requester."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from access.models import Requester
from crawls.fairshare import step_priorities
from crawls.models import CrawlJob, JobStatus
from crawls.services.jobs import job_claim_fair, job_create
from project.messaging.messages import broker_priority
from project.redis import get_redis, redis_key
from tests.clients import client_for

SHOP = "http://shop.test"


@pytest.fixture(autouse=True)
def clean_turns(db):
    client = get_redis()
    for key in client.scan_iter(redis_key("fairshare", "*")):
        client.delete(key)
    yield


def limited(name: str, limit: int | None):
    api = client_for(name)
    Requester.objects.filter(name=name).update(max_active_jobs=limit)
    return api, Requester.objects.get(name=name)


@pytest.mark.django_db
def test_a_job_past_max_active_jobs_is_refused_with_429_naming_the_limit(builtins, sent_tasks):
    api, _ = limited("capped", 2)
    for n in range(2):
        assert api.post("/api/jobs/", {"url": f"{SHOP}/{n}"}, format="json").status_code == 201

    refused = api.post("/api/jobs/", {"url": f"{SHOP}/3"}, format="json")

    assert refused.status_code == 429, refused.content
    assert "max_active_jobs" in refused.json()["detail"] and "at most 2" in refused.json()["detail"]
    assert CrawlJob.objects.filter(requester__name="capped").count() == 2


@pytest.mark.django_db
def test_a_batch_counts_all_its_jobs_and_ended_jobs_free_their_place(builtins, sent_tasks):
    api, requester = limited("capped", 3)
    job = api.post("/api/jobs/", {"url": f"{SHOP}/0"}, format="json").json()

    too_many = api.post("/api/batches/", {"jobs": [{"url": f"{SHOP}/{n}"} for n in range(3)]}, format="json")
    assert too_many.status_code == 429 and not requester.batches.exists()

    CrawlJob.objects.filter(pk=job["id"]).update(status=JobStatus.SUCCEEDED, finished_at=timezone.now())
    fits = api.post("/api/batches/", {"jobs": [{"url": f"{SHOP}/{n}"} for n in range(3)]}, format="json")
    assert fits.status_code == 201, fits.content


@pytest.mark.django_db
def test_the_command_sets_a_cap_of_its_own(builtins, sent_tasks):
    api, requester = limited("free", None)  # the installation default (100) applies meanwhile
    assert all(api.post("/api/jobs/", {"url": f"{SHOP}/{n}"}, format="json").status_code == 201 for n in range(5))

    out = StringIO()
    call_command("issue_token", "free", "--max-active-jobs", "5", stdout=out)

    assert json.loads(out.getvalue())["requester"] == "free"
    requester.refresh_from_db()
    assert requester.max_active_jobs == 5
    assert api.post("/api/jobs/", {"url": f"{SHOP}/6"}, format="json").status_code == 429


def queue(requester, count: int, priority: int = 50) -> list[CrawlJob]:
    urls = [f"{SHOP}/{requester.name}/{n}" for n in range(count)]
    return [job_create(url=url, requester=requester, priority=priority) for url in urls]


@pytest.mark.django_db
def test_a_slot_serves_the_requester_with_fewest_running_then_the_one_served_longest_ago(builtins, sent_tasks):
    _, big = limited("big", None)
    _, small = limited("small", None)
    backlog = queue(big, 6)
    late = queue(small, 2)

    started = [job_claim_fair(job_id=str(job.pk), attempt=1, worker="w") for job in backlog[:4]]

    owners = [job.requester.name for job in started]
    assert owners == ["big", "small", "big", "small"], "round-robin, although all four messages were big's"
    # A slot whose own job is the owed requester's runs it (no needless swap).
    assert [job.pk for job in started] == [backlog[0].pk, late[0].pk, backlog[2].pk, late[1].pk]
    # small's own messages come later and are slots too: they run big's oldest waiting jobs.
    assert job_claim_fair(job_id=str(late[0].pk), attempt=1, worker="w").pk == backlog[1].pk


@pytest.mark.django_db
def test_a_tie_goes_to_the_older_requester_by_id_as_a_number(builtins, sent_tasks):
    """Ids 9 and 10: compared as text "10" sorted first, so who was served first depended on the ids' digits."""
    older = Requester.objects.create(pk=9, name="older", webhook_secret="s")
    newer = Requester.objects.create(pk=10, name="newer", webhook_secret="s")
    mine = queue(newer, 1)[0]
    theirs = queue(older, 1)[0]

    assert job_claim_fair(job_id=str(mine.pk), attempt=1, worker="w").pk == theirs.pk


@pytest.mark.django_db
def test_slots_never_cross_priority_steps(builtins, sent_tasks):
    _, big = limited("big", None)
    _, small = limited("small", None)
    low = queue(big, 2, priority=10)
    queue(small, 2, priority=90)

    claimed = job_claim_fair(job_id=str(low[0].pk), attempt=1, worker="w")

    assert claimed.pk == low[0].pk


@pytest.mark.django_db
def test_a_job_is_not_moved_into_a_slot_too_short_for_its_timeout(builtins, sent_tasks, settings):
    _, big = limited("big", None)
    _, small = limited("small", None)
    backlog = queue(big, 2)
    queue(small, 1)

    claimed = job_claim_fair(job_id=str(backlog[0].pk), attempt=1, worker="w", slot_soft_limit=1.0)

    assert claimed.pk == backlog[0].pk


@pytest.mark.django_db
def test_a_slot_whose_job_is_gone_runs_the_next_owed_job(builtins, sent_tasks):
    _, big = limited("big", None)
    jobs = queue(big, 2)
    CrawlJob.objects.filter(pk=jobs[0].pk).update(status=JobStatus.CANCELLED, finished_at=timezone.now())

    assert job_claim_fair(job_id=str(jobs[0].pk), attempt=1, worker="w").pk == jobs[1].pk
    assert job_claim_fair(job_id=str(jobs[0].pk), attempt=1, worker="w") is None


def test_priority_steps_partition_1_to_100():
    covered = []
    for step in range(10):
        low, high = step_priorities(step)
        assert {broker_priority(p) for p in range(low, high + 1)} == {step}
        covered += range(low, high + 1)
    assert sorted(covered) == list(range(1, 101))


@pytest.mark.django_db
def test_a_claim_whose_turn_count_redis_refuses_still_runs_the_claimed_job(builtins, sent_tasks, monkeypatch):
    """Redis gone between the pick and the count (a restart under load): the job this slot claimed is still the
    one it runs. Before, the slot fell back to claiming its own job again, found it `running` and crawled nothing,
    leaving the claimed job to the reaper, which spent one of its attempts."""
    import redis

    from crawls.services import jobs

    _, requester = limited("alone", None)
    [mine] = queue(requester, 1)

    def refused(**_kwargs):
        raise redis.ConnectionError("Error 111 connecting: Connection refused")

    monkeypatch.setattr(jobs, "fair_served", refused)  # the fault at the one moment a restart cannot be timed to
    claimed = job_claim_fair(job_id=str(mine.pk), attempt=1, worker="w")

    assert claimed is not None and claimed.pk == mine.pk
    assert CrawlJob.objects.get(pk=mine.pk).status == JobStatus.RUNNING


@pytest.mark.django_db
def test_with_one_requester_queued_the_pick_weighs_nobody(builtins, sent_tasks, django_assert_max_num_queries):
    """Fair share orders requesters; with jobs of one requester alone queued at a step (the common case: one team, or
    beat's own jobs) there is nobody to weigh it against, so the pick reads neither the running shards nor the served
    turns: each of many crawls starting at once pays two queries and one Redis read less."""
    from crawls import fairshare

    _, requester = limited("alone", None)
    backlog = queue(requester, 3)

    def unread(*_args, **_kwargs):
        raise AssertionError("the served turns were read")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fairshare, "get_redis", unread)
        with django_assert_max_num_queries(2):  # the queued requesters, then the oldest of theirs (not its own)
            picked = fairshare.fair_pick(priority=backlog[1].priority, own=None, slot_soft_limit=None)
        assert picked.pk == backlog[0].pk
        with django_assert_max_num_queries(1):  # its own job is the owed one: no further query
            assert fairshare.fair_pick(priority=backlog[1].priority, own=backlog[1], slot_soft_limit=None) == backlog[1]


@pytest.mark.django_db
def test_a_claim_holds_its_turn_for_the_pick_and_the_claim_only(builtins, sent_tasks):
    """A crawl host's claims take turns (project/pools/turns.py): each holds the turn for the pick and the claim, not
    for reading its own job before nor the claimed one after, so the claims of many crawls starting at once follow
    each other sooner. The served mark is written in the turn too (fair share's order reads it)."""
    import contextlib

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from project.messaging.messages import priority_step

    _, requester = limited("alone", None)
    [mine] = queue(requester, 1)
    inside = CaptureQueriesContext(connection)
    before = CaptureQueriesContext(connection)

    turns = []

    @contextlib.contextmanager
    def turn():
        turns.append(before.__exit__(None, None, None))
        with inside:
            yield

    before.__enter__()
    try:
        claimed = job_claim_fair(job_id=str(mine.pk), attempt=1, worker="w", turn=turn)
    finally:
        if not turns:  # the claim failed before its turn: stop capturing all the same
            before.__exit__(None, None, None)

    assert claimed.pk == mine.pk and claimed.status == JobStatus.RUNNING
    assert [query["sql"].startswith("SELECT") for query in before.captured_queries] == [True], "its own job, read first"
    in_turn = [query["sql"].split()[0] for query in inside.captured_queries]
    assert in_turn == ["SELECT", "UPDATE"], "the queued requesters and the claim; the claimed job is read after"
    columns = inside.captured_queries[0]["sql"].split(" FROM ")[0]
    assert "DISTINCT" in columns and "queued_at" not in columns, "a row per requester, not one per queued job"
    served = get_redis().hget(redis_key("fairshare", "served_at", priority_step(mine.priority)), str(requester.pk))
    assert int(served) > 1_700_000_000_000_000, "served, marked with Redis's clock in microseconds"


@pytest.mark.django_db
def test_served_marks_of_a_step_only_grow_even_if_redis_clock_steps_back(builtins, sent_tasks):
    """Fair share's served-longest-ago order: each mark is Redis's clock, but never below the step's last mark + 1
    (a clock stepped back by NTP, or a failover to a node whose clock is behind, must not put a requester first)."""
    from crawls.fairshare import _served_key, fair_served
    from project.messaging.messages import priority_step

    _, first = limited("first", None)
    _, second = limited("second", None)
    [a] = queue(first, 1)
    [b] = queue(second, 1)
    key = _served_key(priority_step(a.priority))
    ahead = 5_000_000_000_000_000  # far past Redis's clock: as if the clock had stepped back since
    get_redis().hset(key, "~last", ahead)

    fair_served(job=a)
    fair_served(job=b)

    marks = get_redis().hgetall(key)
    assert int(marks[str(first.pk)]) == ahead + 1 and int(marks[str(second.pk)]) == ahead + 2
