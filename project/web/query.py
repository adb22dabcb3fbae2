"""A list endpoint's query parameters: declared as a serializer (so OpenAPI lists them), checked before the view runs,
and an unknown one is a 400 naming it — `?statuss=failed` is a typo to report, not a filter to ignore silently while
every row comes back (request bodies are as strict: project.web.serializers.StrictSerializer)."""

from __future__ import annotations

from datetime import UTC, datetime

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework import serializers
from rest_framework.settings import api_settings

# Every list understands these: its page (project.web.pagination) and a renderer asked by name (`?format=csv`).
SHARED_PARAMS = frozenset({"limit", "offset", api_settings.URL_FORMAT_OVERRIDE})
UNKNOWN = "Unknown query parameter."
ID_MAX = 2**63 - 1  # the largest row id every supported database stores: a larger one is a 400, not a 500


def row_id_field(**options: object) -> serializers.IntegerField:
    """A query parameter naming a row by its integer id."""
    return serializers.IntegerField(min_value=1, max_value=ID_MAX, **options)


class QueryParams(serializers.Serializer):
    """The query parameters a list endpoint knows beside the shared ones; subclasses declare its filters. Validated
    as partial: a filter left out is absent from `validated_data`, never a default."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, partial=True, **kwargs)

    def to_internal_value(self, data):
        unknown = sorted(set(data) - set(self.fields) - SHARED_PARAMS)
        if unknown:
            raise serializers.ValidationError({name: [UNKNOWN] for name in unknown})
        return super().to_internal_value(data)


def moment_parse(value: str) -> datetime:
    """An ISO 8601 date-time, as UTC. Naive values are UTC; odd offsets (PostgreSQL refuses beyond ±15:59) are
    converted here so the database only ever sees UTC. ValueError when it is not one."""
    try:
        moment = parse_datetime(value.replace(" ", "+"))  # a "+01:00" offset arrives as " 01:00" unless encoded
        if moment is None:
            raise ValueError(value)
        if timezone.is_naive(moment):
            moment = timezone.make_aware(moment, UTC)
        return moment.astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValueError(f"{value!r} is not an ISO 8601 date-time") from None


class MomentField(serializers.DateTimeField):
    """A time-range bound (`..._since`: at or after it, `..._before`: before it), read by `moment_parse`."""

    def to_internal_value(self, value) -> datetime:
        try:
            return moment_parse(str(value))
        except ValueError:
            raise serializers.ValidationError("Give an ISO 8601 date-time, e.g. 2026-11-23T09:00:00Z.") from None


class QueryChecked:
    """A viewset mixin: each action named in `query_params` has its query parameters checked (after authentication
    and permissions, so a caller without a token still gets its 401) into `self.filters`."""

    query_params: dict[str, type[QueryParams]] = {}

    def initial(self, request, *args, **kwargs) -> None:
        super().initial(request, *args, **kwargs)
        self.filters = {}
        params = self.query_params.get(self.action)
        if params is not None:
            spec = params(data=request.query_params)
            spec.is_valid(raise_exception=True)
            self.filters = dict(spec.validated_data)
