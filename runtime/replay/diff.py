"""Comparing a replay's items with the recorded job's, per field. Pure functions.

Items are matched by their identity, as Trawl stores them (its `id`, `sku` or `url` field, else the whole item:
items.services.item_fingerprint's order); keys starting with `_` are bookkeeping and not compared."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

IDENTITY_FIELDS = ("id", "sku", "url")
EXAMPLES = 5  # items shown per differing field


def identity(item: dict[str, Any]) -> str:
    for name in IDENTITY_FIELDS:
        if item.get(name):
            return f"{name}:{item[name]}"
    return json.dumps({k: v for k, v in item.items() if not k.startswith("_")}, sort_keys=True, default=str)


def items_diff(recorded: list[dict[str, Any]], replayed: list[dict[str, Any]]) -> dict[str, Any]:
    """{"clean", "recorded", "replayed", "missing", "extra", "fields": {field: {"items": n, "examples": [...]}},
    "summary"}: which fields differ on which items, and items one side has and the other has not."""
    before = {identity(item): item for item in recorded}
    after = {identity(item): item for item in replayed}
    fields: dict[str, dict[str, Any]] = {}
    counts: Counter = Counter()
    for key in sorted(before.keys() & after.keys()):
        old, new = before[key], after[key]
        for name in sorted((old.keys() | new.keys()) - {k for k in old.keys() | new.keys() if k.startswith("_")}):
            if old.get(name) != new.get(name):
                counts[name] += 1
                examples = fields.setdefault(name, {"items": 0, "examples": []})["examples"]
                if len(examples) < EXAMPLES:
                    examples.append({"item": key, "recorded": old.get(name), "replayed": new.get(name)})
    for name, count in counts.items():
        fields[name]["items"] = count
    missing = sorted(before.keys() - after.keys())
    extra = sorted(after.keys() - before.keys())
    clean = not fields and not missing and not extra
    return {
        "clean": clean,
        "recorded": len(before),
        "replayed": len(after),
        "missing": missing[:50],
        "missing_count": len(missing),
        "extra": extra[:50],
        "extra_count": len(extra),
        "fields": fields,
        "summary": diff_summary(fields=counts, missing=len(missing), extra=len(extra), total=len(before)),
    }


def diff_summary(*, fields: Counter, missing: int, extra: int, total: int) -> str:
    if not fields and not missing and not extra:
        return f"no difference in {total} item(s)"
    parts = [f"{name} differs on {count} of {total} item(s)" for name, count in sorted(fields.items())]
    if missing:
        parts.append(f"{missing} recorded item(s) missing")
    if extra:
        parts.append(f"{extra} item(s) not in the recording")
    return "; ".join(parts)
