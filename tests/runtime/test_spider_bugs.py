"""How a crawl reports the bugs spiders ship, from real exceptions raised through a real Scrapy crawl of a local site:
a callback's NameError keeps the spider's file and line (Scrapy's frames elided in the middle, never the end) in the
crawl's first error and its log line; exceptions of item pipelines are counted and fail the job at the default limit.

Crawls run in a subprocess of their own: the reactor is process-wide and the test process must not own one.
"""

from __future__ import annotations

import inspect
import logging

import pytest
from django.conf import settings

from runtime.bridge.joblog import record_line
from runtime.bridge.outcome import ErrorClass, classify
from runtime.bridge.tracebacks import TRACEBACK_MAX_CHARS, middle_cut, traceback_shaped
from tests.fixtures import spider_bugs
from tests.workers import last_json_line, script_run

SCRIPT = """
import json, logging, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from runtime.bridge.joblog import record_line
from runtime.bridge.outcome import job_stats
from runtime.bridge.runner import run_spider
from tests.crawler import composed
from tests.fixtures import spider_bugs

url, spider = sys.argv[1], getattr(spider_bugs, sys.argv[2])
lines = []

class Lines(logging.Handler):
    def emit(self, record):
        if record.levelno >= logging.ERROR:
            lines.append(record_line(record, max_chars=4000))

logging.getLogger("scrapy").addHandler(Lines())
extensions = {"EXTENSIONS": {"runtime.watch.item_errors.ItemErrorStats": 0}, "LOG_LEVEL": "ERROR"}
crawl, _ = run_spider(
    spider_cls=spider,
    settings=composed(extensions),
    spider_kwargs={"url": url, "start_urls": [url], "options": {}, "config": {}},
    timeout=60,
    on_tick=lambda session: "",
    tick_seconds=0.2,
)
print(json.dumps({"stats": job_stats(crawl.stats), "first": crawl.first_spider_error, "log": lines}))
"""


def crawled(site, spider: str) -> dict:
    done = script_run(SCRIPT, f"{site.url}/index.html", spider)
    assert done.returncode == 0, done.stderr[-3000:]
    return last_json_line(done)


def line_of(text: str, cls: type) -> int:
    source, start = inspect.getsourcelines(cls)
    return start + next(number for number, line in enumerate(source) if text in line)


def default_verdict(result: dict):
    return classify(
        stats=result["stats"],
        first_spider_error=result["first"],
        max_spider_errors=settings.TRAWL_MAX_SPIDER_ERRORS,
        max_spider_error_share=settings.TRAWL_MAX_SPIDER_ERROR_SHARE,
    )


def test_a_callbacks_name_error_keeps_the_spiders_file_and_line(site):
    result = crawled(site, "NameErrorSpider")
    first, line = result["first"], line_of("price_of(response)", spider_bugs.NameErrorSpider)

    print(f"\n{first}")
    assert first.startswith(f"NameError: name 'price_of' is not defined (at {site.url}/index.html)\n")
    assert f'spider_bugs.py", line {line}, in parse' in first
    assert "frames of Scrapy, Twisted and Trawl ...]" in first  # the middle elided...
    assert first.rstrip().endswith("NameError: name 'price_of' is not defined")  # ...never the end
    assert len(first) < TRACEBACK_MAX_CHARS + 600
    (log,) = result["log"]
    assert "Spider error processing" in log and f'spider_bugs.py", line {line}, in parse' in log
    assert log.rstrip().endswith("NameError: name 'price_of' is not defined")
    assert (result["stats"]["spider_exceptions"], result["stats"]["errors"]) == (1, 1)
    verdict = default_verdict(result)
    assert verdict.error_class == ErrorClass.SPIDER_ERROR and f'spider_bugs.py", line {line}' in verdict.message


def test_a_pipeline_raising_on_some_items_is_counted_and_fails_the_job_at_the_default_limit(site):
    result = crawled(site, "ChokingPipelineSpider")
    stats, first = result["stats"], result["first"]

    assert (stats["item_errors"], stats["items_scraped"], stats["errors"]) == (65, 55, 65)
    assert first.startswith("ValueError: warehouse rejected item 0: no price (in an item pipeline, item of ")
    line = line_of("raise ValueError", spider_bugs.ChokingPipeline)
    assert f'spider_bugs.py", line {line}, in process_item' in first
    verdict = default_verdict(result)
    assert verdict.error_class == ErrorClass.SPIDER_ERROR
    assert verdict.message.startswith("spider raised 65 time(s) (0 in callbacks, 65 in item pipelines); first: ")


def test_the_default_limit_lets_one_bad_item_in_thousands_pass_but_not_one_in_a_small_crawl():
    def verdict(**stats):
        stats["errors"] = stats.get("spider_exceptions", 0) + stats.get("item_errors", 0)
        return classify(
            stats={"status_codes": {"200": 1}, **stats},
            max_spider_errors=settings.TRAWL_MAX_SPIDER_ERRORS,
            max_spider_error_share=settings.TRAWL_MAX_SPIDER_ERROR_SHARE,
        ).error_class

    assert verdict(pages=1, items_scraped=4999, item_errors=1) == ""
    assert verdict(pages=5000, spider_exceptions=3) == ""
    assert verdict(pages=5, spider_exceptions=1) == ErrorClass.SPIDER_ERROR
    assert verdict(pages=1, items_scraped=55, item_errors=65) == ErrorClass.SPIDER_ERROR


FRAMEWORK = "/venv/lib/python3.11/site-packages/scrapy/core/spidermw.py"
TWISTED = "/venv/lib/python3.11/site-packages/twisted/internet/defer.py"


def frame(path: str, number: int, code: str = "pass") -> str:
    return f'  File "{path}", line {number}, in f{number}\n    {code}\n'


def test_framework_frames_between_the_spiders_are_elided_and_the_first_and_last_kept():
    text = (
        "Traceback (most recent call last):\n"
        + "".join(frame(FRAMEWORK, n) for n in range(1, 30))
        + frame("/srv/project/shop/spiders/books.py", 40, "self.parse_price(x)")
        + "".join(frame(TWISTED, n) for n in range(100, 120))
        + frame("/srv/project/shop/spiders/books.py", 88, "return undefined")
        + "".join(frame(FRAMEWORK, n) for n in range(200, 210))
        + "KeyError: 'price'\n"
    )
    shaped = traceback_shaped(text)

    assert shaped.splitlines()[0:2] == ["Traceback (most recent call last):", frame(FRAMEWORK, 1).splitlines()[0]]
    assert "[... 28 frames of Scrapy, Twisted and Trawl ...]" in shaped
    assert "[... 20 frames of Scrapy, Twisted and Trawl ...]" in shaped
    assert 'books.py", line 40' in shaped and 'books.py", line 88' in shaped
    assert "[... 7 frames of Scrapy, Twisted and Trawl ...]" in shaped  # 3 of the last 10 kept: where it was raised
    assert shaped.endswith(f"{frame(FRAMEWORK, 209)}KeyError: 'price'".rstrip("\n"))


def test_a_chained_exception_keeps_both_ends_and_a_long_traceback_loses_its_middle_only():
    def raise_chained():
        try:
            {}["price"]
        except KeyError as exc:
            raise ValueError("no price on page") from exc

    try:
        raise_chained()
    except ValueError as exc:
        import traceback

        shaped = traceback_shaped("".join(traceback.format_exception(exc)))
    assert "KeyError: 'price'" in shaped and "direct cause" in shaped and shaped.endswith("no price on page")

    long = "\n".join(f"line {n}" for n in range(5000)) + "\nValueError: the end"
    cut = middle_cut(long, max_chars=1000)
    assert len(cut) <= 1000 and cut.startswith("line 0\n") and cut.endswith("ValueError: the end")
    assert "characters cut ...]" in cut


def test_a_log_records_traceback_keeps_its_end_within_the_line_limit():
    try:
        raise RuntimeError("deep")
    except RuntimeError:
        record = logging.LogRecord("scrapy.core.scraper", logging.ERROR, __file__, 1, "x" * 9000, None, None)
        import sys

        record.exc_info = sys.exc_info()
    line = record_line(record, max_chars=2000)
    assert len(line) < 2600 and line.rstrip().endswith("RuntimeError: deep") and "…" in line


@pytest.mark.parametrize("message", ["a" * 2000, "first line\nsecond line"])
def test_the_headline_is_one_bounded_line(message):
    from runtime.bridge.tracebacks import exception_report

    headline = exception_report(ValueError(message), where=" (at http://shop.test/)").splitlines()[0]
    assert len(headline) < 600 and headline.endswith(" (at http://shop.test/)") and headline.startswith("ValueError: ")
