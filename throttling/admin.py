"""Admin for throttle rules and proxies. Saves go through the services, which publish rules to Redis."""

from dataclasses import asdict
from typing import Any

from django import forms
from django.contrib import admin
from django.utils import timezone

from project.errors import TrawlError
from throttling.models import DomainThrottle, Proxy
from throttling.services import (
    FIELDS as THROTTLE_FIELDS,
)
from throttling.services import (
    default_limits,
    domain_normalize,
    proxies_cool_down_end,
    throttle_delete,
    throttle_effective,
    throttle_robots,
    throttle_save,
    throttle_update,
)


class DomainThrottleForm(forms.ModelForm):
    class Meta:
        model = DomainThrottle
        fields = ["domain", *THROTTLE_FIELDS]  # the fields the services save, in their order

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["concurrency"].required = False  # empty: the project's default (TRAWL_THROTTLE_DEFAULTS)

    def clean_concurrency(self) -> int:
        value = self.cleaned_data.get("concurrency")
        return default_limits().concurrency if value is None else value

    def clean_domain(self) -> str:
        try:
            return domain_normalize(self.cleaned_data["domain"])
        except TrawlError as exc:
            raise forms.ValidationError(exc.message) from exc

    def clean(self):
        cleaned = super().clean()
        for name in ("burst", "ip_burst"):
            if cleaned.get(name) is not None and cleaned[name] < 1:
                self.add_error(name, "At least 1; to stop all requests, tick blocked.")
        return cleaned


@admin.register(DomainThrottle)
class DomainThrottleAdmin(admin.ModelAdmin):
    """Saves go through the throttle services, which publish the rule to Redis: running crawls obey it at once."""

    form = DomainThrottleForm
    list_display = (
        "domain",
        "rate",
        "burst",
        "ip_rate",
        "ip_burst",
        "scale",
        "blocked",
        "adaptive",
        "concurrency",
        "effective_rate",
        "adaptive_reason",
        "robots_delay",
        "updated_at",
    )
    list_filter = ("blocked", "adaptive", "obey_crawl_delay")
    readonly_fields = ("effective_rate", "adaptive_reason", "robots_delay")

    @admin.display(description="robots.txt asks")
    def robots_delay(self, throttle: DomainThrottle) -> str:
        return throttle_robots(throttle)["robots_reason"] if throttle.pk else "-"

    @admin.display(description="effective rate (req/s)")
    def effective_rate(self, throttle: DomainThrottle) -> float | str:
        return throttle_effective(throttle)["effective_rate"] if throttle.pk else "-"

    @admin.display(description="why")
    def adaptive_reason(self, throttle: DomainThrottle) -> str:
        return throttle_effective(throttle)["adaptive_reason"] if throttle.pk else "-"

    search_fields = ("domain", "note")
    actions = ["block", "unblock"]

    def get_changeform_initial_data(self, request) -> dict:
        initial = {**asdict(default_limits()), **super().get_changeform_initial_data(request)}
        return {**initial, "max_pages_per_job": initial.get("max_pages_per_job") or None}

    def save_model(self, request, obj, form, change) -> None:
        throttle_save(throttle=obj)

    def delete_model(self, request, obj) -> None:
        throttle_delete(throttle=obj)

    def delete_queryset(self, request, queryset) -> None:
        for throttle in queryset:
            throttle_delete(throttle=throttle)

    @admin.action(description="Block selected domains")
    def block(self, request, queryset):
        for throttle in queryset:
            throttle_update(throttle=throttle, blocked=True)
        self.message_user(request, f"Blocked {queryset.count()} domain(s); running crawls drop their requests now.")

    @admin.action(description="Unblock selected domains")
    def unblock(self, request, queryset):
        for throttle in queryset:
            throttle_update(throttle=throttle, blocked=False)
        self.message_user(request, f"Unblocked {queryset.count()} domain(s).")


@admin.register(Proxy)
class ProxyAdmin(admin.ModelAdmin):
    list_display = ("__str__", "egress_label", "group", "enabled", "cooling", "cooling_down_until")
    list_filter = ("enabled", "group")
    search_fields = ("url", "egress_label", "note")
    actions = ["end_cool_down"]

    @admin.display(description="cooling down", boolean=True)
    def cooling(self, proxy: Proxy) -> bool:
        return bool(proxy.cooling_down_until and proxy.cooling_down_until > timezone.now())

    @admin.action(description="End the cool-down of selected proxies")
    def end_cool_down(self, request, queryset):
        count = proxies_cool_down_end(proxies=queryset)
        self.message_user(request, f"{count} proxy(ies) back in rotation (workers see it within seconds).")
