"""Field-level differences between two versions of an item's data, and walking a change back (pure functions).

A field is a top-level key of the item's data; a dict value is followed one level down, each of its keys a field of
its own named `<key>.<subkey>` (`sections.Pricing`), so a change inside one section moves only that section. Keys
starting with `_` are bookkeeping (`_provenance`, crawl times): never a change, never volatile, never in a diff.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Path = tuple[str, ...]  # ("price",) or ("sections", "Pricing")

ADDED, REMOVED, CHANGED = "added", "removed", "changed"


@dataclass(frozen=True)
class FieldChange:
    path: Path
    kind: str  # added | removed | changed
    old: Any = None
    new: Any = None

    @property
    def field(self) -> str:
        return field_name(self.path)


def field_name(path: Path) -> str:
    return ".".join(path)


def fields_flat(data: dict[str, Any] | None) -> dict[Path, Any]:
    """Every field's value by path: dicts one level deep, `_` keys left out. An empty dict is a value of its own."""
    flat: dict[Path, Any] = {}
    for key, value in (data or {}).items():
        if not isinstance(key, str) or key.startswith("_"):
            continue
        if isinstance(value, dict) and value:
            for sub, sub_value in value.items():
                flat[(key, str(sub))] = sub_value
        else:
            flat[(key,)] = value
    return flat


def fields_diff(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[FieldChange]:
    """What moved from `old` to `new`, field by field, in a stable order (removals first, then by path)."""
    before, after = fields_flat(old), fields_flat(new)
    changes = [FieldChange(path, REMOVED, old=value) for path, value in before.items() if path not in after]
    for path, value in after.items():
        if path not in before:
            changes.append(FieldChange(path, ADDED, new=value))
        elif before[path] != value:
            changes.append(FieldChange(path, CHANGED, old=before[path], new=value))
    return sorted(changes, key=lambda change: (change.kind != REMOVED, change.path))


def change_revert(data: dict[str, Any], *, path: Path, kind: str, old: Any) -> None:
    """Undo one change in place: what `data` held before it. Applied newest first, changes walk data back in time."""
    if kind == ADDED:
        _remove(data, path)
    else:
        _put(data, path, old)


def _remove(data: dict[str, Any], path: Path) -> None:
    if len(path) == 1:
        data.pop(path[0], None)
        return
    inner = data.get(path[0])
    if isinstance(inner, dict) and path[1] in inner:
        inner = dict(inner)
        del inner[path[1]]
        if inner:
            data[path[0]] = inner
        else:  # the dict came with this key: before it, there was no dict
            data.pop(path[0], None)


def _put(data: dict[str, Any], path: Path, value: Any) -> None:
    if len(path) == 1:
        data[path[0]] = value
        return
    inner = data.get(path[0])
    data[path[0]] = {**(inner if isinstance(inner, dict) else {}), path[1]: value}
