"""A spider's exception as a job reports it: `Type: message` on the first line (what lists and webhooks show), then
the traceback, so a broken spider is debugged from its job alone — as in a terminal running `scrapy crawl`.

A callback's exception comes up through a chain of some fifty frames of Scrapy's spider middlewares (async
generators wrapping async generators); the spider's own frame is the last but one. The traceback a job keeps is
shaped: every frame of the spider's own code is kept, and so are the first frame and the last frames (where it was
raised, even inside a library); a run of framework frames (Scrapy, Twisted, the standard library, Trawl's own
components) between them is one `[... N frames of Scrapy, Twisted and Trawl ...]` line. When the shaped text is
still too long, its middle is cut — never its end, where the exception and the spider's line are.
"""

from __future__ import annotations

import os
import re
import sysconfig
import traceback
from pathlib import Path
from typing import Any

TRACEBACK_MAX_CHARS = 3000  # with the headline, within a job's error (crawls.services.lifecycle.MESSAGE_MAX)
HEADLINE_MAX_CHARS = 500
TAIL_FRAMEWORK_FRAMES = 3  # framework frames kept after the spider's last one: where the exception was raised
FRAME = re.compile(r'^  File "(?P<file>[^"]*)", line \d+')
# Installed packages whose frames are the machinery around a spider. Any other installed package's are kept: a
# packaged version's own code is installed in its environment's site-packages too.
FRAMEWORK_PACKAGES = frozenset(
    ("scrapy", "twisted", "crochet", "parsel", "w3lib", "itemadapter", "itemloaders", "zope", "playwright", "greenlet")
)
INSTALLED = re.compile(r"[/\\](?:site|dist)-packages[/\\](?P<package>[^/\\]+)")
STDLIB_DIRS = tuple({path for key in ("stdlib", "platstdlib") if (path := sysconfig.get_paths().get(key))})
_ROOT = Path(__file__).resolve().parents[2]
# Trawl's own Scrapy components (its middlewares, pipelines, bridge), but not its built-in spiders.
TRAWL_DIRS = tuple(f"{_ROOT / name}{os.sep}" for name in ("runtime", "throttling", "items"))
TRAWL_SPIDER_DIRS = (f"{_ROOT / 'runtime' / 'spiders'}{os.sep}",)


def exception_report(exc: BaseException, *, where: str = "") -> str:
    headline = _bounded_headline(f"{type(exc).__name__}: {exc}", where)
    return f"{headline}\n\n{traceback_shaped(''.join(traceback.format_exception(exc)))}"


def failure_report(failure: Any, *, where: str = "") -> str:
    """The same for a Twisted Failure (Scrapy's spider_error and item_error signals hand one)."""
    headline = _bounded_headline(f"{failure.type.__name__}: {failure.getErrorMessage()}", where)
    if failure.value is not None and failure.value.__traceback__ is not None:
        return f"{headline}\n\n{traceback_shaped(''.join(traceback.format_exception(failure.value)))}"
    return f"{headline}\n\n{traceback_shaped(failure.getTraceback())}"


def spider_error_report(failure: Any, response: Any) -> str:
    """A callback's exception, and the page it was handling. No response: the spider's start() raised (Scrapy hands
    its error to the same signal)."""
    url = getattr(response, "url", None)
    return failure_report(failure, where=f" (at {url})" if url else " (in start)")


def item_error_report(failure: Any, response: Any) -> str:
    """An item pipeline's exception, and the page whose item it was processing."""
    url = getattr(response, "url", None)
    return failure_report(failure, where=f" (in an item pipeline, item of {url})" if url else " (in an item pipeline)")


def traceback_shaped(text: str, *, max_chars: int = TRACEBACK_MAX_CHARS) -> str:
    """A formatted traceback (chained ones too) with the library frames between the spider's own elided, then its
    middle cut if it is still longer than `max_chars`."""
    return middle_cut("\n".join(_shaped_lines(text.rstrip().splitlines())), max_chars=max_chars)


def middle_cut(text: str, *, max_chars: int) -> str:
    """`text` within `max_chars`: its first third and its last two thirds, cut at line ends where it can be, with a
    line saying how much was cut. The end of a traceback is what matters most, its beginning what it is about."""
    if len(text) <= max_chars:
        return text
    marker = "\n[... {} characters cut ...]\n"
    room = max(0, max_chars - len(marker) - 8)
    head, tail = text[: room // 3], text[len(text) - (room - room // 3) :]
    head = head[: head.rfind("\n")] if "\n" in head else head
    tail = tail[tail.find("\n") + 1 :] if "\n" in tail else tail
    return f"{head}{marker.format(len(text) - len(head) - len(tail))}{tail}"


def is_framework_file(filename: str) -> bool:
    """A frame of Scrapy, Twisted, the standard library or Trawl's own components: not the spider's code."""
    installed = INSTALLED.search(filename)
    if installed:
        return installed["package"] in FRAMEWORK_PACKAGES
    if filename.startswith(TRAWL_DIRS):
        return not filename.startswith(TRAWL_SPIDER_DIRS)
    return filename.startswith("<frozen ") or filename.startswith(STDLIB_DIRS)


def _shaped_lines(lines: list[str]) -> list[str]:
    """The lines with every run of framework frames in a traceback's middle replaced by one line."""
    shaped: list[str] = []
    index = 0
    while index < len(lines):
        if not FRAME.match(lines[index]):
            shaped.append(lines[index])
            index += 1
            continue
        frames, index = _frames_from(lines, index)
        shaped.extend(line for frame in _kept(frames) for line in frame)
    return shaped


def _frames_from(lines: list[str], index: int) -> tuple[list[list[str]], int]:
    """The consecutive frames from `index` (each its `File` line and the indented source lines under it)."""
    frames: list[list[str]] = []
    while index < len(lines) and FRAME.match(lines[index]):
        frame = [lines[index]]
        index += 1
        while index < len(lines) and lines[index].startswith("    "):
            frame.append(lines[index])
            index += 1
        frames.append(frame)
    return frames, index


def _kept(frames: list[list[str]]) -> list[list[str]]:
    """One traceback's frames: the first, the spider's own, and the last few; an elision line for each run cut."""
    framework = [is_framework_file(FRAME.match(frame[0])["file"]) for frame in frames]
    own = [position for position, is_framework in enumerate(framework) if not is_framework]
    last_own = own[-1] if own else -1
    keep = {0, *own, *range(max(last_own + 1, len(frames) - TAIL_FRAMEWORK_FRAMES), len(frames))}
    kept: list[list[str]] = []
    elided = 0
    for position, frame in enumerate(frames):
        if position in keep:
            if elided:
                kept.append([_elision(elided)])
                elided = 0
            kept.append(frame)
        else:
            elided += 1
    return kept


def _elision(count: int) -> str:
    return f"  [... {count} frame{'s' if count > 1 else ''} of Scrapy, Twisted and Trawl ...]"


def _bounded_headline(headline: str, where: str) -> str:
    """`Type: message` and where, on one line a list can show (an exception's message may be a page of HTML)."""
    first, *more = headline.splitlines() or [""]
    if more or len(first) > HEADLINE_MAX_CHARS:
        first = first[:HEADLINE_MAX_CHARS] + " …"
    return f"{first}{where}"
