"""Monitor rules (TRAWL_MONITORS): pure functions over a finished crawl's stats."""

from __future__ import annotations

import pytest

from project.errors import TrawlError
from registry.monitors import Breach, coverage, error_rate, items_drop, monitors_check, monitors_parse


def check(spec, *, stats, field_coverage=None, history=()):
    return monitors_check(monitors_parse(spec), stats=stats, field_coverage=field_coverage or {}, history=history)


def test_error_rate_counts_error_responses_and_failed_downloads_per_request():
    stats = {"requests": 10, "status_codes": {"200": 5, "301": 1, "404": 1, "500": 2}, "download_errors": {"X": 1}}

    assert error_rate(stats) == 0.4
    assert error_rate({"requests": 0}) is None


def test_min_items_breach_names_expected_and_actual():
    assert check({"min_items": 100}, stats={"items": 1}) == [Breach("min_items", 100, 1)]
    assert check({"min_items": 1}, stats={"items": 1}) == []


def test_a_monitor_may_fail_the_job():
    breaches = check({"min_items": {"value": 5, "fail": True}}, stats={"items": 2})

    assert breaches == [Breach("min_items", 5, 2, fail=True)]
    assert breaches[0].as_alert() == {"monitor": "min_items", "expected": 5, "actual": 2}


def test_max_error_rate():
    stats = {"requests": 4, "status_codes": {"500": 3, "200": 1}}

    assert check({"max_error_rate": 0.5}, stats=stats) == [Breach("max_error_rate", 0.5, 0.75)]
    assert check({"max_error_rate": 0.8}, stats=stats) == []


def test_min_coverage_per_field():
    field_coverage = coverage({"coverage/items": 4, "coverage/field/price": 2, "coverage/field/title": 4})

    breaches = check(
        {"min_coverage": {"price": 0.95, "title": 0.9, "sku": 0.1}}, stats={"items": 4}, field_coverage=field_coverage
    )

    assert breaches == [Breach("min_coverage.price", 0.95, 0.5), Breach("min_coverage.sku", 0.1, 0.0)]


def test_items_drop_against_the_median_of_recent_runs():
    assert items_drop(50, [100, 90, 110, 5, 100]) == 0.5
    assert items_drop(50, []) is None
    assert check({"max_items_drop": 0.4}, stats={"items": 50}, history=[100, 100, 100]) == [
        Breach("max_items_drop", 0.4, 0.5)
    ]
    assert check({"max_items_drop": 0.6}, stats={"items": 50}, history=[100]) == []
    assert check({"max_items_drop": 0.1}, stats={"items": 50}) == []  # no baseline yet


def test_later_layers_override_monitor_by_monitor():
    merged = monitors_parse({"min_items": 10, "max_error_rate": 0.2}, None, {"min_items": 3})

    assert (merged["min_items"].value, merged["max_error_rate"].value) == (3, 0.2)


@pytest.mark.parametrize(
    "spec",
    [{"min_itemz": 1}, {"min_items": -1}, {"min_items": "10"}, {"max_error_rate": 2}, {"min_coverage": {"a": 5}}, []],
)
def test_bad_monitors_are_refused_naming_the_setting(spec):
    with pytest.raises(TrawlError) as error:
        monitors_parse(spec)
    assert error.value.field == "TRAWL_MONITORS"
