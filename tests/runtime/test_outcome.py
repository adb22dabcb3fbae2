"""Scrapy stats → job stats → error class: what a user reads on a finished job."""

from __future__ import annotations

import pytest

from runtime.bridge.outcome import classify, job_stats


def scrapy_stats(*, statuses=None, robots=None, exceptions=None, **extra) -> dict:
    """Stats as Scrapy's collector leaves them: `statuses`/`robots` map HTTP code → count, robots included in totals."""
    statuses, robots, exceptions = statuses or {}, robots or {}, exceptions or {}
    stats: dict = {}
    for code in set(statuses) | set(robots):
        stats[f"downloader/response_status_count/{code}"] = statuses.get(code, 0) + robots.get(code, 0)
    for code, count in robots.items():
        stats[f"robotstxt/response_status_count/{code}"] = count
    for name, count in exceptions.items():
        stats[f"downloader/exception_type_count/{name}"] = count
    responses = sum(statuses.values()) + sum(robots.values())
    stats["downloader/request_count"] = responses + sum(exceptions.values())
    stats["response_received_count"] = responses
    if robots:
        stats["robotstxt/request_count"] = sum(robots.values())
        stats["robotstxt/response_count"] = sum(robots.values())
    stats.update(extra)
    return stats


def verdict_of(scrapy: dict, **kwargs):
    return classify(stats=job_stats(scrapy), **kwargs)


def test_robots_txt_responses_are_not_counted_as_pages():
    stats = job_stats(scrapy_stats(statuses={200: 3}, robots={404: 1}))

    assert stats["pages"] == 3
    assert stats["requests"] == 3
    assert stats["status_codes"] == {"200": 3}


def test_robots_txt_and_page_with_the_same_status_count_only_the_page():
    stats = job_stats(scrapy_stats(statuses={200: 2}, robots={200: 1}))

    assert stats["status_codes"] == {"200": 2}
    assert stats["pages"] == 2


def test_a_good_robots_txt_does_not_hide_a_failed_page():
    verdict = verdict_of(scrapy_stats(statuses={404: 1}, robots={200: 1}))

    assert verdict.error_class == "http_4xx"


def test_a_missing_robots_txt_does_not_fail_a_good_crawl():
    verdict = verdict_of(scrapy_stats(statuses={200: 1}, robots={404: 1}))

    assert verdict.error_class == ""


def test_one_good_page_among_errors_is_success():
    verdict = verdict_of(scrapy_stats(statuses={200: 1, 404: 3, 500: 2}))

    assert verdict.error_class == ""


def test_dns_failure():
    verdict = verdict_of(scrapy_stats(exceptions={"twisted.internet.error.DNSLookupError": 2}))

    assert verdict.error_class == "dns"
    assert "DNSLookupError" in verdict.message


def test_connection_failure():
    verdict = verdict_of(scrapy_stats(exceptions={"twisted.internet.error.ConnectionRefusedError": 1}))

    assert verdict.error_class == "connection"
    assert "ConnectionRefusedError" in verdict.message


def test_download_error_names_are_short_in_stats():
    stats = job_stats(scrapy_stats(exceptions={"twisted.internet.error.TimeoutError": 2}))

    assert stats["download_errors"] == {"TimeoutError": 2}


@pytest.mark.parametrize("code", [403, 429])
def test_forbidden_and_too_many_requests_are_blocked(code):
    verdict = verdict_of(scrapy_stats(statuses={code: 1}))

    assert verdict.error_class == "blocked"
    assert str(code) in verdict.message


def test_blocking_wins_over_other_errors():
    verdict = verdict_of(scrapy_stats(statuses={403: 1, 500: 1, 404: 1}))

    assert verdict.error_class == "blocked"


@pytest.mark.parametrize("code", [404, 410, 400])
def test_client_errors(code):
    assert verdict_of(scrapy_stats(statuses={code: 1})).error_class == "http_4xx"


@pytest.mark.parametrize("code", [500, 502, 503])
def test_server_errors(code):
    assert verdict_of(scrapy_stats(statuses={code: 2})).error_class == "http_5xx"


def test_server_error_wins_over_client_error():
    assert verdict_of(scrapy_stats(statuses={404: 1, 500: 1})).error_class == "http_5xx"


def test_robots_txt_forbidding_everything_is_blocked():
    verdict = verdict_of(scrapy_stats(robots={200: 1}, **{"robotstxt/forbidden": 1}))

    assert verdict.error_class == "blocked"
    assert "robots.txt" in verdict.message


def test_zero_requests_is_a_spider_error():
    verdict = verdict_of({})

    assert verdict.error_class == "spider_error"
    assert "no requests" in verdict.message


def test_spider_exceptions_fail_the_job_with_the_first_error():
    scrapy = scrapy_stats(statuses={200: 3}, **{"spider_exceptions/count": 2, "spider_exceptions/ValueError": 2})

    verdict = verdict_of(scrapy, first_spider_error="ValueError: no price (at http://shop/1)")

    assert verdict.error_class == "spider_error"
    assert "2 time(s)" in verdict.message
    assert "no price" in verdict.message


def test_spider_exceptions_within_the_allowed_number_succeed():
    scrapy = scrapy_stats(statuses={200: 3}, **{"spider_exceptions/count": 2})

    assert verdict_of(scrapy, max_spider_errors=2).error_class == ""


def test_spider_exceptions_counted_without_a_total_key():
    stats = job_stats(scrapy_stats(statuses={200: 1}, **{"spider_exceptions/KeyError": 1, "spider_exceptions/X": 2}))

    assert stats["spider_exceptions"] == 3


def test_crawl_error_is_a_spider_error():
    verdict = verdict_of(scrapy_stats(), crawl_error="TypeError: __init__() got an unexpected keyword")

    assert verdict.error_class == "spider_error"
    assert "unexpected keyword" in verdict.message


def test_timeout_wins_even_with_good_pages():
    verdict = verdict_of(scrapy_stats(statuses={200: 7}), stopped_because="timeout")

    assert verdict.error_class == "timeout"
    assert "7 pages" in verdict.message


def test_cancelled_wins_over_everything():
    verdict = verdict_of(scrapy_stats(statuses={500: 1}), stopped_because="cancelled", crawl_error="boom")

    assert verdict.error_class == "cancelled"


def test_lost_ownership_is_worker_lost():
    assert verdict_of(scrapy_stats(statuses={200: 1}), stopped_because="lost").error_class == "worker_lost"


def test_job_stats_are_json_ready_numbers():
    scrapy = scrapy_stats(
        statuses={200: 2},
        robots={200: 1},
        **{"downloader/response_bytes": 1234, "item_scraped_count": 5, "finish_reason": "finished"},
    )

    stats = job_stats(scrapy)

    assert stats["bytes"] == 1234
    assert stats["items_scraped"] == 5
    assert stats["finish_reason"] == "finished"
    assert stats["spider_exceptions"] == 0


def test_job_stats_carry_the_throttle_middleware_numbers():
    scrapy = {"throttle/waits": 3, "throttle/wait_seconds_total": 1.5, "throttle/held_seconds": 0.7}
    stats = job_stats({**scrapy, "downloader/request_count": 4})

    assert stats["throttle"] == {"waits": 3, "wait_seconds_total": 1.5, "held_seconds": 0.7}


def test_requests_dropped_for_a_blocked_domain_make_a_blocked_job():
    verdict = classify(stats={"requests": 2, "download_errors": {"DomainBlocked": 2}, "status_codes": {}})

    assert verdict.error_class == "blocked"


# --- blocks: by share, captchas on every response ----------------------------------------------------------


def blocks(checked: int, blocked: int, captcha: int = 0) -> dict:
    return {"blocks/checked": checked, "blocks/blocked": blocked, "blocks/captcha": captcha}


def test_job_stats_say_how_many_responses_were_checked_apart_from_how_many_were_blocks():
    stats = job_stats(scrapy_stats(statuses={200: 133}, **blocks(133, 0)))

    assert stats["blocks"] == {"checked": 133, "blocked": 0, "captcha": 0}


def test_one_good_page_among_a_run_of_403s_is_still_a_block():
    verdict = verdict_of(scrapy_stats(statuses={200: 1, 403: 9}, **blocks(10, 9)))

    assert verdict.error_class == "blocked"
    assert "9 of 10" in verdict.message


def test_a_few_blocks_in_a_healthy_crawl_are_not_a_block():
    assert verdict_of(scrapy_stats(statuses={200: 9, 429: 1}, **blocks(10, 1))).error_class == ""


def test_429s_whose_pages_were_sent_back_and_fetched_later_are_not_blocks():
    polite = scrapy_stats(statuses={200: 10, 429: 30}, **blocks(40, 30), **{"throttle/requeued_429": 30})
    assert verdict_of(polite).error_class == "", "every page came in the end: the site said 'slower', not 'go away'"
    refused = scrapy_stats(statuses={200: 1, 429: 39}, **blocks(40, 39), **{"throttle/requeued_429": 30})
    assert verdict_of(refused).error_class == "blocked", "still refused after every re-queue: a block"


def test_captcha_pages_answered_200_are_blocks():
    verdict = verdict_of(scrapy_stats(statuses={200: 4}, **blocks(4, 3, captcha=3)))

    assert verdict.error_class == "blocked"
    assert "3 captcha page(s)" in verdict.message


def test_the_blocked_share_is_a_setting():
    stats = scrapy_stats(statuses={200: 7, 403: 3}, **blocks(10, 3))

    assert verdict_of(stats).error_class == ""
    assert verdict_of(stats, block_share=0.3).error_class == "blocked"


def test_the_detector_counts_captchas_on_every_response_proxy_or_not():
    from scrapy.http import HtmlResponse, Request

    from runtime.watch.blocks import BlockDetector

    class Stats(dict):
        def inc_value(self, key, count=1):
            self[key] = self.get(key, 0) + count

    stats = Stats()
    detector = BlockDetector(markers=["g-recaptcha", "Are you a robot"], stats=stats)
    pages = [
        (200, b"<html><div class='g-recaptcha'></div></html>"),
        (200, b"<html><p>ARE YOU A ROBOT?</p></html>"),
        (200, b"<html><h1>A product</h1></html>"),
        (403, b"forbidden"),
    ]
    for status, body in pages:
        request = Request("https://shop.test/p")  # no proxy meta: captchas are checked anyway
        detector.process_response(request, HtmlResponse(request.url, status=status, body=body, request=request))

    assert stats == {"blocks/checked": 4, "blocks/captcha": 2, "blocks/blocked": 3}
