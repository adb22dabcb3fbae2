"""Serializer pieces every app's API shares."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know, so a typo is an error instead of a silently ignored option."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)


def http_url(value: str) -> None:
    if not value.lower().startswith(("http://", "https://")):
        raise serializers.ValidationError("Only http and https URLs can be crawled or called back.")


def errors_flat(detail: Any, prefix: str = "") -> list[tuple[str, str]]:
    """A DRF error detail as (dotted field, message) pairs: `{"options": {"maxdepth": [msg]}}` → `options.maxdepth`.
    For a command line, which prints what the API would answer as JSON."""
    if isinstance(detail, dict):
        return [
            pair
            for key, value in detail.items()
            for pair in errors_flat(value, f"{prefix}.{key}" if prefix else str(key))
        ]
    if isinstance(detail, list):
        if all(not isinstance(value, dict | list) for value in detail):
            return [(prefix or "detail", str(message)) for message in detail]
        return [pair for index, value in enumerate(detail) if value for pair in errors_flat(value, f"{prefix}.{index}")]
    return [(prefix or "detail", str(detail))]
