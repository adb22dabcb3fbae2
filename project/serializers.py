"""Serializer pieces every app's API shares."""

from __future__ import annotations

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
