"""The environment of the helpers a rendering worker starts (runtime/rendering/environment.py): an allow-list, built
from Playwright's own call for the driver, with the worker's os.environ left as it is. The end-to-end attack reads
/proc/<pid>/environ of a real worker's driver and Chromium: tests/security/test_render_helpers.py."""

from __future__ import annotations

import os

from playwright._impl import transport

from runtime.rendering.environment import chromium_env, driver_scrubbed


def test_chromium_environment_is_allow_listed():
    worker = {"PATH": "/usr/bin", "HOME": "/home/trawl", "LC_ALL": "C.UTF-8", "SECRET_KEY": "s", "DATABASE_URL": "d"}
    assert chromium_env("/usr/bin/chromium", worker) == {
        "PATH": "/usr/bin",
        "HOME": "/home/trawl",
        "LC_ALL": "C.UTF-8",
        "TRAWL_CHROMIUM_BINARY": "/usr/bin/chromium",
    }


def test_the_driver_is_started_with_playwrights_names_and_the_allow_list_only(monkeypatch):
    monkeypatch.setenv("SECRET_KEY", "not-for-the-driver")
    monkeypatch.setenv("DATABASE_URL", "postgres://trawl:secret@db/trawl")
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setattr(transport, "get_driver_env", transport.get_driver_env)  # put back after the test
    driver_scrubbed()
    driver_scrubbed()  # idempotent

    env = transport.get_driver_env()
    assert "SECRET_KEY" not in env and "DATABASE_URL" not in env
    assert env["LANG"] == "C.UTF-8" and env["PATH"] == os.environ["PATH"]
    assert env["PW_LANG_NAME"] == "python"  # what Playwright adds for its driver is kept
    assert os.environ["SECRET_KEY"] == "not-for-the-driver"  # the worker's own environment is untouched
