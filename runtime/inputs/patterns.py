"""Requester regexes in linear time: every pattern a requester gives runs on RE2, never on Python's `re`.

Python's `re` backtracks: `(a+)+$` against forty `a` and a `b` runs for hours on the reactor thread, holding the GIL,
so the worker's heartbeat starves and the reaper re-runs the same pattern on every attempt. RE2 matches in time linear
in the text (times the pattern's size, which is capped here) and refuses what it cannot run that way (backreferences,
lookaround): such a pattern is refused with the field it came from, at submission (the job, batch and source checks
call these functions) and again when a spider starts (options reach spiders by other paths too, e.g. jobs stored
before this check existed). One home: the checks and the spiders compile with the same `patterns_compile`.

Where requesters put regexes: job options `allow_regex` / `deny_regex` (the `link` spider), and the spider config's
`allow` / `deny` / `follow` (the `sitemap` spider), from a job's `options.config` or a source's config. XPath and CSS
selectors of the config are runtime/inputs/xpaths.py's; runtime/inputs/checks.py checks a whole job's options.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import re2

MAX_PATTERN_LENGTH = 500  # characters of one pattern: bounds RE2's program, so the per-character cost of a match
MAX_PATTERNS = 50  # patterns in one field: every URL is matched against each
RE2_MAX_MEM = 8 << 20  # bytes RE2 may use for one pattern's program and DFA cache (RE2's own default, made explicit)


class PatternError(ValueError):
    """A requester pattern or selector Trawl will not run. `field` is where it was, dotted: `allow_regex`,
    `config.fields.title`."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.message = message
        self.field = field


def _options() -> re2.Options:
    options = re2.Options()
    options.max_mem = RE2_MAX_MEM
    options.log_errors = False  # a refused pattern is the requester's error, not a line on the worker's stderr
    return options


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def pattern_compile(pattern: Any, *, field: str) -> Any:
    """One requester regex compiled with RE2, or PatternError naming `field`."""
    if not isinstance(pattern, str):
        raise PatternError(f"a pattern is a string, got {type(pattern).__name__}", field=field)
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise PatternError(f"a pattern has at most {MAX_PATTERN_LENGTH} characters, got {len(pattern)}", field=field)
    if not pattern.isascii() and not _encodable(pattern):
        raise PatternError("a pattern must be valid Unicode (no lone surrogates)", field=field)
    try:
        return re2.compile(pattern, options=_options())
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PatternError(
            f"{pattern!r} is not a valid regular expression that runs in linear time (RE2: {reason}); "
            "backreferences and lookaround are not supported",
            field=field,
        ) from None


@dataclass(frozen=True)
class Patterns:
    """Compiled requester regexes of one field. Empty: no filter."""

    compiled: tuple[Any, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.compiled)

    def search(self, text: str) -> bool:
        """Whether any pattern matches somewhere in `text` (like `re.search`)."""
        return any(pattern.search(text) is not None for pattern in self.compiled)


def patterns_compile(values: Any, *, field: str) -> Patterns:
    """A field's patterns (one string or a list of them; None or empty: none), compiled with RE2 and capped."""
    if values is None or values == "" or values == []:
        return Patterns()
    items = [values] if isinstance(values, str) else values
    if not isinstance(items, list | tuple):
        raise PatternError(f"expected a pattern or a list of patterns, got {type(values).__name__}", field=field)
    if len(items) > MAX_PATTERNS:
        raise PatternError(f"at most {MAX_PATTERNS} patterns, got {len(items)}", field=field)
    return Patterns(tuple(pattern_compile(value, field=f"{field}.{index}") for index, value in enumerate(items)))
