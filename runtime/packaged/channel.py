"""The worker's end of a package child's message channel: bounded, whatever the child (uploaded code) writes into it.

- A line longer than MAX_LINE_BYTES is never held whole: it is skipped as it is read, and counted.
- Lines read and not yet consumed by the task thread take at most INBOX_BYTES: past that the reader waits, the pipe
  fills, and the child's own writes block (its crawl waits for the worker, as an in-process crawl waits for its item
  queue). A child being stopped is never waited for: what it still sends is read and dropped.
- Log records are handled under `trawl.package.<the child's logger name>`, for at most LOGGER_NAMES_MAX names per
  worker process (a logger lives as long as its process); other names, and names that are not dotted identifiers,
  go to `trawl.package` itself.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections import deque
from typing import IO, Any

logger = logging.getLogger("trawl.packages")
# The largest message: a screenshot (2 MiB of JPEG, as base64) with room to spare; an item or a record larger is
# dropped. INBOX_BYTES: what the reader may hold unconsumed (a few of the largest).
MAX_LINE_BYTES = 8 * 1024 * 1024
INBOX_BYTES = 32 * 1024 * 1024
BAD_LINES_LOGGED = 10  # per child: lines that are too long or not JSON, logged one by one (all are counted)
PACKAGE_LOGGER = "trawl.package"
LOGGER_NAMES_MAX = 200
LOGGER_NAME = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")
LOGGER_NAME_CHARS = 100
_logger_names: set[str] = set()
_names_lock = threading.Lock()


class Inbox:
    """A queue of the child's messages bounded by their size in bytes, which can be abandoned."""

    def __init__(self, *, max_bytes: int = INBOX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.items: deque[tuple[dict[str, Any], int]] = deque()
        self.size = 0
        self.abandoned = False  # the child is being stopped: nothing more is queued, nobody waits
        self.dropped = 0  # lines skipped: too long, not JSON, or sent to an abandoned inbox
        self.cond = threading.Condition()

    def put(self, message: dict[str, Any], size: int) -> bool:
        """Queue `message` (read as `size` bytes), waiting while the inbox is full. False if it was dropped."""
        with self.cond:
            while self.items and self.size + size > self.max_bytes and not self.abandoned:
                self.cond.wait()
            if self.abandoned:
                self.dropped += 1
                return False
            self.items.append((message, size))
            self.size += size
            self.cond.notify_all()
            return True

    def put_last(self, message: dict[str, Any]) -> None:
        """The reader's final word (`eof`): never waits, never dropped unless abandoned."""
        with self.cond:
            if not self.abandoned:
                self.items.append((message, 0))
                self.cond.notify_all()

    def get(self, *, timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not self.items:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)
            message, size = self.items.popleft()
            self.size -= size
            self.cond.notify_all()
            return message

    def abandon(self) -> None:
        with self.cond:
            self.abandoned = True
            self.items.clear()
            self.size = 0
            self.cond.notify_all()

    def drop(self) -> None:
        with self.cond:
            self.dropped += 1


def channel_read(channel: IO[bytes], inbox: Inbox, *, who: str) -> None:
    """Read the child's JSON lines into `inbox` until the channel closes (the child exited)."""
    complaints = 0
    while line := channel.readline(MAX_LINE_BYTES + 1):
        problem = ""
        if len(line) > MAX_LINE_BYTES:
            problem = f"a line over {MAX_LINE_BYTES} bytes"
            if not line.endswith(b"\n"):
                _skip_line(channel)
        else:
            try:
                message = json.loads(line)
            except ValueError:
                message, problem = None, f"a line that is not JSON: {line[:200]!r}"
            if not problem and not isinstance(message, dict):
                problem = "a line that is not a JSON object"
        if problem:
            inbox.drop()
            complaints += 1
            if complaints <= BAD_LINES_LOGGED:
                logger.warning("package child %s sent %s: dropped", who, problem)
        else:
            inbox.put(message, len(line))


def _skip_line(channel: IO[bytes]) -> None:
    """The rest of a line too long to keep, read in pieces and thrown away."""
    while (piece := channel.readline(MAX_LINE_BYTES)) and not piece.endswith(b"\n"):
        pass


def package_logger_name(name: Any) -> str:
    """The logger a child's record is handled by: one of a bounded set under `trawl.package`."""
    name = str(name or "")[:LOGGER_NAME_CHARS]
    if not LOGGER_NAME.fullmatch(name):
        return PACKAGE_LOGGER
    full = f"{PACKAGE_LOGGER}.{name}"
    with _names_lock:
        if full in _logger_names:
            return full
        if len(_logger_names) < LOGGER_NAMES_MAX:
            _logger_names.add(full)
            return full
    return PACKAGE_LOGGER
