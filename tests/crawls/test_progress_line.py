"""`manage.py crawl --wait` on a terminal: the progress line fits the terminal's width and keeps the page count."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from crawls.management.progress_line import ProgressLine, progress_display

STATS = {
    "pages": 108,
    "queued": 32,
    "items": 95,
    "items_new": 95,
    "items_changed": 0,
    "throttle": {"held_seconds": 1.2},
}
VERSION = "demo_shop 1.1.0 (canary)"


def drawn(renderable, *, width: int) -> str:
    out = io.StringIO()
    Console(file=out, width=width, force_terminal=True, color_system=None).print(renderable)
    return out.getvalue()


def the_commands_display(*, width: int) -> str:
    """What the command draws: its own rich Progress with the job's task, rendered once at `width`."""
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system=None)
    display = progress_display(console, disable=False)
    display.add_task(VERSION, total=None, status="running", stats=STATS, elapsed=51.0)
    console.print(display.make_tasks_table(display.tasks))
    return out.getvalue()


def test_at_80_columns_the_line_keeps_version_bar_pages_and_items_on_one_line():
    text = the_commands_display(width=80)

    (line,) = text.splitlines()
    assert line == "running   demo_shop 1.1.0 (canary) ━━━━━━━ 108/140 pages  items 95 (95 new) 0:51"
    assert len(line) <= 80


def test_a_wide_terminal_shows_every_number():
    line = the_commands_display(width=160).splitlines()[0].rstrip()

    assert line.startswith("running   demo_shop 1.1.0 (canary) ━━━━")
    assert line.endswith(" 108/140 pages  items 95 (95 new, 0 changed)  throttle delay 1.2 s 0:51")


@pytest.mark.parametrize("width", range(30, 161, 5))
def test_at_any_width_the_page_count_stays_and_nothing_wraps(width):
    (line,) = drawn(ProgressLine(status="running", version=VERSION, stats=STATS, elapsed=51), width=width).splitlines()

    assert len(line) <= width
    assert line.startswith("running ") and "108/140 pages" in line
    assert width < 60 or "items 95 (95 new" in line
    assert width < 80 or VERSION in line


def test_the_bar_fills_with_the_work_done():
    done = {**STATS, "pages": 140, "queued": 0}
    (line,) = drawn(ProgressLine(status="succeeded", version=VERSION, stats=done, elapsed=51), width=80).splitlines()

    assert "━━━━━━━ 140/140 pages" in line
    (queued,) = drawn(
        ProgressLine(status="queued", version="shop (routing)", stats={}, elapsed=0), width=80
    ).splitlines()
    assert "0/0 pages  items 0 (0 new" in queued
