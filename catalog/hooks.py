"""Where items (above catalog) hears that an external category name now means one of ours, without catalog
importing items: items subscribes in its AppConfig.ready() (tests/test_layers.py keeps imports downward)."""

from __future__ import annotations

from collections.abc import Callable

from project.hooks import subscribe_once

# (external_name=, category_id=) -> None; category_id None: the name means none of our categories.
NameMappedReceiver = Callable[..., object]

NAME_MAPPED: list[NameMappedReceiver] = []


def on_name_mapped(receiver: NameMappedReceiver) -> NameMappedReceiver:
    return subscribe_once(NAME_MAPPED, receiver)


def name_mapped(*, external_name: str, category_id: int | None) -> None:
    """Inside the mapping's transaction: a receiver that raises undoes the mapping with it."""
    for receiver in NAME_MAPPED:
        receiver(external_name=external_name, category_id=category_id)
