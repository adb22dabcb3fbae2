"""Where items (above catalog) hears that an external category name now means one of ours, without catalog
importing items: items subscribes in its AppConfig.ready() (tests/test_layers.py keeps imports downward)."""

from __future__ import annotations

from collections.abc import Callable

# (external_name=, category_id=) -> None; category_id None: the name means none of our categories.
NameMappedReceiver = Callable[..., object]

NAME_MAPPED: list[NameMappedReceiver] = []


def on_name_mapped(receiver: NameMappedReceiver) -> NameMappedReceiver:
    if receiver not in NAME_MAPPED:  # ready() may run twice (a test re-populating apps): subscribe once
        NAME_MAPPED.append(receiver)
    return receiver


def name_mapped(*, external_name: str, category_id: int | None) -> None:
    """Inside the mapping's transaction: a receiver that raises undoes the mapping with it."""
    for receiver in NAME_MAPPED:
        receiver(external_name=external_name, category_id=category_id)
