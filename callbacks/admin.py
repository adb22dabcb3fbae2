import json

from django.contrib import admin
from django.utils.html import format_html

from callbacks.models import Delivery, DeliveryAttempt, DeliveryStatus
from callbacks.services import delivery_redeliver

STATUS_COLOURS = {
    DeliveryStatus.PENDING: "#6c757d",
    DeliveryStatus.FAILED: "#fd7e14",
    DeliveryStatus.DELIVERED: "#198754",
    DeliveryStatus.DEAD: "#dc3545",
}


class AttemptInline(admin.TabularInline):
    """The delivery log: one row per POST, with what the receiver answered and how long it took."""

    model = DeliveryAttempt
    fields = ("number", "started_at", "duration_ms", "status_code", "ok", "error")
    readonly_fields = fields
    extra = 0
    can_delete = False
    max_num = 0


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = (
        "short_id",
        "event",
        "target_url",
        "status_badge",
        "attempts",
        "last_status_code",
        "next_attempt_at",
        "delivered_at",
        "created_at",
    )
    list_filter = ("status", "event", "requester")
    search_fields = ("id", "dedupe_key", "target_url")
    date_hierarchy = "created_at"
    fields = (
        "id",
        "event",
        "status",
        "target_url",
        "requester",
        "job",
        "batch",
        "attempts",
        "max_attempts",
        "next_attempt_at",
        "last_status_code",
        "last_error",
        "delivered_at",
        "created_at",
        "payload_pretty",
    )
    readonly_fields = fields
    inlines = [AttemptInline]
    actions = ["deliver_again"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.display(description="event id")
    def short_id(self, delivery: Delivery) -> str:
        return str(delivery.id)[:8]

    @admin.display(description="status", ordering="status")
    def status_badge(self, delivery: Delivery):
        colour = STATUS_COLOURS.get(delivery.status, "#6c757d")
        return format_html('<b style="color:{}">{}</b>', colour, delivery.get_status_display())

    @admin.display(description="payload")
    def payload_pretty(self, delivery: Delivery):
        return format_html("<pre>{}</pre>", json.dumps(delivery.payload, indent=2, sort_keys=True))

    @admin.action(description="Deliver again (same event id, fresh attempts)")
    def deliver_again(self, request, queryset):
        for delivery in queryset:
            delivery_redeliver(delivery=delivery)
        self.message_user(request, f"Queued {queryset.count()} delivery(ies) again.")
