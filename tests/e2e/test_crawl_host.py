"""Several crawls in one crawl process (issue 42, project/pools/crawlhost.py), with real worker processes and local
sites: each crawl ends its own way and keeps its own log; a SIGKILLed process's crawls all resume from their frontiers;
a warm shutdown hands every crawl of a process back at once.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess

import pytest

from crawls.models import CrawlJob
from items.models import Item
from tests.e2e.crawl_host_stack import (
    GaugedSite,
    all_ended,
    eight_per_process,
    jobs_of,
    memory_bound,
    scraper_with,
    two_hosts,
    two_per_process,
    wait_ended,
    wait_until,
    whole_log,
)
from tests.e2e.faults_stack import submit
from tests.e2e.frontier_stack import (
    CONCURRENT_REQUESTS,
    HANDOVER_GOAL_SECONDS,
    TreeSite,
    crawl,
    fast_throttle,
    fetched_twice_only_in_flight,
    in_flight_paths,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = ["eight_per_process", "fast_throttle", "memory_bound", "two_hosts", "two_per_process"]  # fixtures


@pytest.fixture
def sites(request):
    """`count` TreeSites of `pages` pages answering after `delay` s, each on a port of its own."""
    made: list[TreeSite] = []

    def make(count: int, *, pages: int, delay: float) -> list[TreeSite]:
        made.extend(TreeSite(pages=pages, delay=delay) for _ in range(count))
        return made[-count:]

    yield make
    for site in made:
        site.server.shutdown()


def running_in_one_process(ids: list[str]) -> set[str] | None:
    jobs = jobs_of(ids)
    workers = {job.worker for job in jobs}
    return workers if all(job.status == "running" for job in jobs) and len(workers) == 1 else None


def test_crawls_of_one_process_are_cancelled_timed_out_stalled_and_succeed_each_on_its_own(
    api, builtins, fast_throttle, sites, eight_per_process
):
    cluster = eight_per_process
    done, cancelled, timed_out, spinning = sites(4, pages=63, delay=0.3)
    timed_out.delay = 1.0
    # DEBUG: every page's "Crawled (200) <GET url>" line is in its job's log, so a line of another crawl would show.
    scraper_with("chatty", "runtime.spiders.link.LinkSpider", LOG_LEVEL="DEBUG")
    scraper_with("short_fuse", "runtime.spiders.link.LinkSpider", LOG_LEVEL="DEBUG", TRAWL_JOB_TIMEOUT=8)
    scraper_with("spinner", "tests.e2e.crawl_host_stack.SpinningSpider", LOG_LEVEL="DEBUG")
    ids = [
        crawl(api, done, scraper="chatty"),
        crawl(api, cancelled, scraper="chatty"),
        crawl(api, timed_out, scraper="short_fuse"),
    ]
    [shared_worker] = wait_until(
        lambda: running_in_one_process(ids), timeout=90, why="not all running", cluster=cluster
    )
    # Cancelled mid-crawl: once its site has answered (its log then names its own pages).
    wait_until(lambda: cancelled.page_hits(), timeout=60, why="the crawl to cancel fetched nothing", cluster=cluster)
    assert api.post(f"/api/jobs/{ids[1]}/cancel/").status_code == 202
    ids.append(submit(api, url=f"{spinning.url}/p/0", scraper="spinner"))
    wait_until(lambda: jobs_of(ids)[3].status == "running", timeout=60, why="the spinner never ran", cluster=cluster)
    assert jobs_of(ids)[3].worker == shared_worker  # the spinner shares the others' process (one process here)

    ended = wait_ended(ids, cluster=cluster, timeout=300)

    outcomes = [(job.status, job.error_class) for job in ended]
    print(f"\noutcomes {outcomes}, attempts {[job.attempt for job in ended]}")
    assert outcomes == [
        ("succeeded", ""),
        ("cancelled", "cancelled"),
        ("failed", "timeout"),
        ("failed", "reactor_stalled"),
    ], [job.error_message[:300] for job in ended]
    spinner = ended[3]
    assert spinner.attempt == spinner.max_attempts and spinner.stats.get("reactor_stalls") == spinner.max_attempts
    assert "in parse" in spinner.error_message  # the spinner's own frame, from the reactor's stack
    assert Item.objects.filter(url__startswith=f"{done.url}/p/").count() == done.pages  # nothing lost on the way
    # Each job's log holds its own crawl's lines and none of another's, over every attempt.
    urls = [site.url for site in (done, cancelled, timed_out, spinning)]
    for job, own in zip(ended, urls, strict=True):
        log = whole_log(job)
        assert f"job start id={job.pk}" in log and "Spider opened" in log and own in log, log[-3000:]
        others = [url for url in urls if url != own] + [str(other.pk) for other in ended if other.pk != job.pk]
        assert not [other for other in others if other in log], (
            job.pk,
            [line for line in log.splitlines() if any(o in line for o in others)][:5],
        )
    assert "held the process's reactor" in whole_log(spinner)


def test_a_killed_process_with_eight_crawls_resumes_every_one_from_its_frontier(
    api, builtins, fast_throttle, sites, eight_per_process
):
    cluster = eight_per_process
    eight = sites(8, pages=127, delay=0.3)  # long enough that none ends before the kill on a loaded machine
    ids = [crawl(api, site) for site in eight]
    [worker] = wait_until(lambda: running_in_one_process(ids), timeout=120, why="not all 8 running", cluster=cluster)
    wait_until(
        lambda: all(sum(site.page_hits().values()) >= 4 for site in eight), timeout=60, why="no pages", cluster=cluster
    )
    os.kill(int(worker.rsplit("/", 1)[-1]), signal.SIGKILL)
    in_flight = [in_flight_paths(job_id) for job_id in ids]  # unchanged until attempt 2 starts: the process is gone

    ended = wait_ended(ids, cluster=cluster, timeout=300)

    assert [(job.status, job.attempt) for job in ended] == [("succeeded", 2)] * 8, [j.error_message for j in ended]
    for site, flying in zip(eight, in_flight, strict=True):
        fetched_twice_only_in_flight(site, flying)  # every page fetched; twice only if in flight at the kill
        assert len(flying) <= CONCURRENT_REQUESTS
        assert Item.objects.filter(url__startswith=f"{site.url}/p/").count() == site.pages  # no page lost


def test_a_warm_shutdown_hands_every_crawl_of_the_process_back_at_once(api, builtins, fast_throttle, sites, two_hosts):
    cluster = two_hosts
    four = sites(4, pages=63, delay=0.3)
    ids = [crawl(api, site) for site in four]
    wait_until(
        lambda: all(job.status == "running" for job in jobs_of(ids)), timeout=90, why="not running", cluster=cluster
    )
    wait_until(
        lambda: all(sum(site.page_hits().values()) >= 8 for site in four), timeout=60, why="no pages", cluster=cluster
    )
    running = jobs_of(ids)
    by_pid: dict[int, list[CrawlJob]] = {}
    for job in running:
        by_pid.setdefault(cluster.pid_of(job), []).append(job)
    pid, held = max(by_pid.items(), key=lambda item: len(item[1]))
    stopping = next(worker for worker in cluster.crawlers if pid in worker.pool_pids())
    stopping.process.send_signal(signal.SIGTERM)  # the main process only: it forwards to the crawl process

    ended = wait_ended(ids, cluster=cluster, timeout=120)

    print(f"\n{len(held)} crawl(s) in the stopped process")
    assert all(job.status == "succeeded" for job in ended), [job.error_message for job in ended]
    handed = {str(job.pk) for job in held}
    assert [job.attempt for job in ended if str(job.pk) in handed] == [2] * len(held)
    for site, job in zip(four, ended, strict=True):
        if str(job.pk) not in handed:
            continue
        times = sorted(site.page_times())
        pause = max(later - earlier for earlier, later in itertools.pairwise(times))
        # A stale heartbeat takes a minute here: only the hand-back explains a short pause in the site's log.
        assert pause < HANDOVER_GOAL_SECONDS, f"{site.url} paused {pause:.1f}s\n{cluster.logs()}"
        assert set(site.page_hits()) == site.all_paths()
    # The warm shutdown ends: no crawl held the worker. The pauses above show the hand-back was at once; this only
    # waits for the process, which a loaded machine took over 30 s to wind down.
    try:
        stopping.process.wait(90)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the SIGTERMed worker is still running\n{cluster.logs()}") from None
    assert CrawlJob.objects.filter(pk__in=handed).exclude(worker__endswith=f"/{pid}").count() == len(held)


def test_two_crawls_of_one_process_share_their_domains_concurrency_limit(
    api, builtins, throttle_keys_clean, two_per_process
):
    """The per-domain concurrency of a throttle rule holds across the crawls of one process (it is kept in Redis)."""
    from throttling.services import throttle_create

    cluster = two_per_process
    throttle_create(domain="127.0.0.1", rate=50, burst=50, ip_rate=50, ip_burst=50, concurrency=2)
    site = GaugedSite(pages=63, delay=0.3)
    try:
        # Two crawls of one site, on disjoint halves of its tree: /p/1's pages and /p/2's.
        ids = [submit(api, url=f"{site.url}/p/{start}", options={"maxdepth": 20}) for start in (1, 2)]
        wait_until(lambda: running_in_one_process(ids), timeout=90, why="not both running at once", cluster=cluster)
        ended = wait_until(lambda: all_ended(ids), timeout=180, why="not both ended", cluster=cluster)
    finally:
        site.server.shutdown()

    print(f"\nat most {site.most} page requests at once")
    assert [job.status for job in ended] == ["succeeded", "succeeded"], [job.error_message for job in ended]
    assert set(site.page_hits()) == site.all_paths() - {"/p/0"}
    assert site.most <= 2


def test_a_process_past_its_memory_bound_hands_every_crawl_back_and_is_replaced(
    api, builtins, fast_throttle, sites, memory_bound
):
    cluster = memory_bound
    [worker] = cluster.crawlers
    # The neighbour's crawl outlasts the hog's start, first page and the memory check after it, however slow they are.
    [hog_site] = sites(1, pages=63, delay=0.3)
    [other_site] = sites(1, pages=255, delay=0.3)
    scraper_with("hog", "tests.e2e.crawl_host_stack.MemoryHogSpider")
    other = crawl(api, other_site)
    wait_until(lambda: jobs_of([other])[0].status == "running", timeout=60, why="not running", cluster=cluster)
    first_pid = cluster.pid_of(jobs_of([other])[0])
    hog = submit(api, url=f"{hog_site.url}/p/0", scraper="hog")

    ended = wait_until(lambda: all_ended([other, hog]), timeout=180, why="not both ended", cluster=cluster)

    assert [(job.status, job.attempt) for job in ended] == [("succeeded", 2)] * 2, [j.error_message for j in ended]
    assert "over worker_max_memory_per_child" in worker.log_tail(400)
    assert first_pid not in worker.pool_pids()  # replaced
    assert set(other_site.page_hits()) == other_site.all_paths()  # handed back, continued, nothing lost
    assert all(cluster.pid_of(job) != first_pid for job in ended)


def test_a_crawl_that_grows_every_process_it_runs_in_ends_memory_exceeded_and_its_neighbour_loses_nothing(
    api, builtins, fast_throttle, sites, memory_bound
):
    """A hand-back that never ended the job would send it round for ever: handed back, taken by the next process,
    grown past the bound again. The crawl beside it in the one process, handed back each time too, is not the one
    its spider's weight names: it spends no attempt and succeeds."""
    cluster = memory_bound
    [worker] = cluster.crawlers
    # More pages than three attempts fetch before their process is measured; the neighbour's crawl outlasts them.
    greedy_site, other_site = sites(2, pages=255, delay=0.3)
    scraper_with("greedy", "tests.e2e.crawl_host_stack.GreedySpider")
    other = crawl(api, other_site)
    wait_until(lambda: jobs_of([other])[0].status == "running", timeout=60, why="not running", cluster=cluster)
    greedy = submit(api, url=f"{greedy_site.url}/p/0", scraper="greedy")

    ended = wait_until(lambda: all_ended([greedy, other]), timeout=300, why="not both ended", cluster=cluster)

    greedy_job, other_job = sorted(ended, key=lambda job: str(job.pk) != greedy)
    assert (greedy_job.status, greedy_job.error_class, greedy_job.attempt) == ("failed", "memory_exceeded", 3)
    assert "grew past its memory bound" in greedy_job.error_message
    assert other_job.status == "succeeded", other_job.error_message
    assert other_job.attempt > 1, "handed back with the greedy one's process at least once"
    assert other_job.max_attempts - 3 == other_job.attempt - 1, "each hand-back gave it one more attempt, free"
    assert set(other_site.page_hits()) == other_site.all_paths()
    log = worker.log_tail(1500)
    assert log.count("over worker_max_memory_per_child") >= 3
    assert f"{greedy}:0 grew it" in log
