"""The suite's pytest-xdist workers: a Redis database of their own, inherited by what they start; files as units."""

from __future__ import annotations

import pytest

from tests.parallel import unit_of, worker_redis_url


@pytest.fixture
def environ(monkeypatch):
    monkeypatch.delenv("TRAWL_TEST_REDIS_WORKER", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)
    return monkeypatch


def test_a_serial_run_uses_the_given_database_else_15(environ):
    assert worker_redis_url() == "redis://127.0.0.1:6379/15"
    environ.setenv("REDIS_URL", "redis://127.0.0.1:6379/9")
    assert worker_redis_url() == "redis://127.0.0.1:6379/9"


def test_each_xdist_worker_steps_down_from_the_given_database(environ):
    environ.setenv("REDIS_URL", "redis://:pw@127.0.0.1:6379/14")
    urls = []
    for worker in ("gw0", "gw1", "gw2"):
        environ.setenv("PYTEST_XDIST_WORKER", worker)
        environ.delenv("TRAWL_TEST_REDIS_WORKER", raising=False)
        urls.append(worker_redis_url())
    assert urls == ["redis://:pw@127.0.0.1:6379/14", "redis://:pw@127.0.0.1:6379/13", "redis://:pw@127.0.0.1:6379/12"]


def test_a_process_a_worker_starts_keeps_the_workers_database(environ):
    environ.setenv("PYTEST_XDIST_WORKER", "gw2")
    environ.setenv("REDIS_URL", worker_redis_url())  # what tests/settings.py puts in the environment
    assert worker_redis_url() == "redis://127.0.0.1:6379/13"  # the child imports the settings again: no second step


def test_too_few_databases_below_the_given_one_is_an_error(environ):
    environ.setenv("REDIS_URL", "redis://127.0.0.1:6379/1")
    environ.setenv("PYTEST_XDIST_WORKER", "gw2")
    with pytest.raises(RuntimeError, match="no Redis database for pytest-xdist worker gw2"):
        worker_redis_url()


def test_a_file_is_one_unit_and_the_rabbitmq_files_are_one_together():
    assert unit_of("tests/e2e/test_beats.py::test_one[a]") == unit_of("tests/e2e/test_beats.py::test_two")
    assert unit_of("tests/e2e/test_beats.py::test_one") == "tests/e2e/test_beats.py"
    assert unit_of("tests/e2e/test_rabbitmq_e2e.py::test_x") == unit_of("tests/e2e/test_rabbitmq_faults.py::test_y")
