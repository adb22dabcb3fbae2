"""What `manage.py crawl --wait` shows of a running job: one plain line per change when the output is a log, a rich
line redrawn in place on a terminal. The rich line fits the terminal's width: narrower, it drops the least useful
parts first (the throttle, the changed count, then shortens the version and the bar) and keeps the page count."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.progress import Progress, ProgressColumn, Task
from rich.text import Text

from crawls.models import CrawlJob

MAX_BAR, MIN_BAR = 40, 6
MIN_VERSION = 12  # shorter than this, a version label says nothing: dropped instead


def version_label(job: CrawlJob) -> str:
    """Which version runs the job: `shop 1.1.0 (canary)`, or what was asked while it is not routed yet."""
    if job.version_id:
        return f"{job.scraper.name} {job.version.version} ({job.version.variant})"
    asked = job.requested_version or job.requested_variant or "routing"
    return f"{job.scraper.name} ({asked})"


def throttle_delay(stats: dict[str, Any]) -> float:
    """How long the throttle held the crawl back (at least one request waiting for a token): wall time, not the sum of
    every concurrent request's wait (`wait_seconds_total`), which reads as more than the crawl took."""
    throttle = stats.get("throttle") if isinstance(stats.get("throttle"), dict) else {}
    value = throttle.get("held_seconds", stats.get("throttle/held_seconds", 0))
    return float(value) if isinstance(value, int | float) else 0.0


def work(stats: dict[str, Any]) -> tuple[int, int]:
    """(pages fetched, pages fetched + requests still queued): the work done out of the work known so far."""
    pages = int(stats.get("pages", 0) or 0)
    return pages, pages + int(stats.get("queued", 0) or 0)


def details(stats: dict[str, Any]) -> list[str]:
    """The items and throttle numbers, longest first: each next one is what a narrower line keeps."""
    items_new, items_changed = stats.get("items_new", 0), stats.get("items_changed", 0)
    items = stats.get("items", items_new + items_changed + stats.get("items_unchanged", 0))
    changes = f"items {items} ({items_new} new, {items_changed} changed)"
    return [f"{changes}  throttle delay {throttle_delay(stats):.1f} s", changes, f"items {items} ({items_new} new)"]


def progress_detail(stats: dict[str, Any]) -> str:
    return details(stats)[0]


def progress_line(*, status: str, version: str, stats: dict[str, Any], elapsed: float) -> str:
    """The progress as one plain line (output that is not a terminal): status, version, work done, items, throttle."""
    done, known = work(stats)
    return f"{status:<9} {version}  pages {done} of {known}  {progress_detail(stats)}  {clock(elapsed)}"


def clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"


class ProgressLine:
    """`running   shop 1.1.0 (canary) ━━━━━━━━━━ 108/140 pages  items 95 (95 new, 0 changed)  throttle delay 1.2 s 0:51`
    on a wide terminal, cut to the width it is drawn in (see `layouts`)."""

    def __init__(self, *, status: str, version: str, stats: dict[str, Any], elapsed: float) -> None:
        self.status, self.version, self.stats, self.elapsed = status, version, stats, elapsed

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.text(options.max_width)

    def text(self, width: int) -> Text:
        done, known = work(self.stats)
        head = f"{self.status:<9}"
        for detail, version_mode, bar in layouts(details(self.stats)):
            right = f"{done}/{known} pages  {detail} {clock(self.elapsed)}"
            room = width - len(head) - 1 - len(right)  # for `version ` and `bar `
            version = self._version(version_mode, room - (MIN_BAR + 1 if bar else 0) - 1)
            used = len(version) + 1 if version else 0
            bar_width = min(MAX_BAR, room - used - 1) if bar else 0
            if used <= room and (not bar or bar_width >= MIN_BAR):
                return self._compose(f"{head} {version + ' ' if version else ''}", done, known, bar_width, right)
        return Text(f"{head} {done}/{known} pages"[:width], no_wrap=True)

    def _version(self, mode: str, room: int) -> str:
        if mode == "full":
            return self.version
        if mode == "cut" and len(self.version) <= room:
            return self.version
        return self.version[: room - 1] + "…" if mode == "cut" and room >= MIN_VERSION else ""

    def _compose(self, left: str, done: int, known: int, bar_width: int, right: str) -> Text:
        text = Text(left, no_wrap=True, overflow="ellipsis")
        if bar_width:
            filled = min(bar_width, round(bar_width * done / known)) if known else 0
            text.append("━" * filled, style="bar.complete" if filled < bar_width else "bar.finished")
            text.append("━" * (bar_width - filled), style="bar.back")
            text.append(" ")
        text.append(right)
        return text


def layouts(variants: list[str]) -> Iterator[tuple[str, str, bool]]:
    """(detail, version: full | cut | none, draw a bar?) from the widest line to the narrowest: the throttle goes
    first, then the changed count, then the version is shortened, the new count goes, the bar, and the version last."""
    full, changes, new = variants
    items_only = new.split(" (")[0]
    yield from ((full, "full", True), (changes, "full", True), (new, "full", True), (new, "cut", True))
    yield from ((items_only, "cut", True), (items_only, "cut", False), (items_only, "none", False))


class ProgressLineColumn(ProgressColumn):
    """The whole line as one column, so that it is cut as a whole (rich would squeeze every column alike)."""

    def render(self, task: Task) -> ProgressLine:
        fields = task.fields
        return ProgressLine(
            status=fields["status"], version=task.description, stats=fields["stats"], elapsed=fields["elapsed"]
        )


def progress_display(console: Console, *, disable: bool) -> Progress:
    return Progress(ProgressLineColumn(), console=console, disable=disable)
