"""A crawl stopped by `run_spider` (cancel, timeout) stops quietly: nothing is logged as an unhandled error once the
stop is done, in a process that lives on as a Celery pool process does (a job's log is read after the job ended, and a
CRITICAL `NoCurrentExceptionError` from crochet landed in it when the stop's result was dropped before it was done).

Run in a subprocess of its own: the reactor is process-wide and the test process must not own one."""

from __future__ import annotations

from tests.workers import last_json_line, script_run

SCRIPT = """
import gc, json, os, sys, time
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from twisted.logger import globalLogPublisher
from tests.runtime.frontier_crawl import link_crawl

errors = []

def observe(event):
    if event.get("log_failure") is not None:
        errors.append(str(event["log_failure"]))

globalLogPublisher.addObserver(observe)
ticks = []

def tick(session):
    ticks.append(1)
    return "cancelled" if len(ticks) >= 3 else ""

crawl = link_crawl(sys.argv[1], on_tick=tick, tick_seconds=0.3)
for _ in range(10):  # the stop finishes after run_spider returned: give it time, and the garbage collector a turn
    time.sleep(0.3)
    gc.collect()
print(json.dumps({"stopped_because": crawl.stopped_because, "errors": errors}))
"""


def test_a_cancelled_crawl_stops_without_an_unhandled_error_after_it(site):
    delay, site.slow_delay = site.slow_delay, 0.1
    try:
        done = script_run(SCRIPT, f"{site.url}/slow/700000")
    finally:
        site.slow_delay = delay

    assert done.returncode == 0, done.stderr[-3000:]
    report = last_json_line(done)
    assert report == {"stopped_because": "cancelled", "errors": []}, report
