"""Reading what a replay's child reported (runtime/replay/child.py writes it as JSON). A packaged version's child runs
uploaded code, so the report is read only up to RESULT_MAX_BYTES, as JSON (never unpickled), and every field is
checked for its type: a report that is not one is the replay's failure (ValueError), never this process's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULT_MAX_BYTES = 256 * 1024 * 1024  # items of a recording of TRAWL_RECORD_MAX_ITEMS items, with room to spare
COUNTS = ("pages", "served", "not_recorded")
TEXT_LISTS = ("errors", "network")
TEXT_CHARS = 1000


def replay_result_read(path: Path) -> dict[str, Any]:
    size = path.stat().st_size
    if size > RESULT_MAX_BYTES:
        raise ValueError(f"the replay's report is {size} bytes, over {RESULT_MAX_BYTES}")
    return replay_result_checked(json.loads(path.read_bytes()))


def replay_result_checked(raw: Any) -> dict[str, Any]:
    """The report's fields, each of its type; ValueError naming the first that is not."""
    if not isinstance(raw, dict):
        raise ValueError("the replay's report is not a JSON object")
    items = raw.get("items")
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise ValueError("the replay's report has no list of items")
    checked: dict[str, Any] = {"items": items}
    for name in COUNTS:
        value = raw.get(name, 0)
        if type(value) is not int or value < 0:
            raise ValueError(f"the replay's report has no count of {name}")
        checked[name] = value
    for name in TEXT_LISTS:
        value = raw.get(name, [])
        if not isinstance(value, list):
            raise ValueError(f"the replay's report has no list of {name}")
        checked[name] = [str(text)[:TEXT_CHARS] for text in value]
    seconds = raw.get("seconds", 0.0)
    checked["seconds"] = float(seconds) if type(seconds) in (int, float) and seconds >= 0 else 0.0
    checked["finish_reason"] = str(raw.get("finish_reason", ""))[:100]
    return checked
