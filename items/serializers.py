"""API output shapes for items and their price history."""

from __future__ import annotations

from rest_framework import serializers


class PriceChangeSerializer(serializers.Serializer):
    old_price = serializers.CharField()
    old_currency = serializers.CharField()
    new_price = serializers.CharField()
    new_currency = serializers.CharField()
    changed_at = serializers.DateTimeField()
    job = serializers.UUIDField(source="job_id", allow_null=True)


class ItemSerializer(serializers.Serializer):
    """An item with its latest price changes, newest first (GET /api/items/)."""

    id = serializers.IntegerField()
    scraper = serializers.CharField(source="scraper.name")
    fingerprint = serializers.CharField()
    url = serializers.CharField()
    data = serializers.JSONField()
    category = serializers.CharField(source="category.name", allow_null=True, default=None)
    first_seen = serializers.DateTimeField()
    last_seen = serializers.DateTimeField()
    changed_at = serializers.DateTimeField()
    price_history = PriceChangeSerializer(source="price_changes.all", many=True)


class FieldChangeSerializer(serializers.Serializer):
    """One field of an item moved (GET /api/items/{id}/changes/)."""

    field = serializers.CharField(help_text="`price`, or `sections.Pricing` one level into a dict field.")
    kind = serializers.CharField(help_text="added | removed | changed")
    old = serializers.JSONField(allow_null=True)
    new = serializers.JSONField(allow_null=True)
    volatile = serializers.BooleanField(help_text="The field changes on most runs of its source: no item change.")
    job = serializers.UUIDField(source="job_id", allow_null=True)
    changed_at = serializers.DateTimeField()
