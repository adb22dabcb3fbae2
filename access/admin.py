from django.contrib import admin

from access.models import ApiToken, Requester
from access.selectors import requester_shard_cap


class ApiTokenInline(admin.TabularInline):
    model = ApiToken
    fields = ("prefix", "created_at", "revoked_at")
    readonly_fields = ("prefix", "created_at")
    extra = 0
    can_delete = False


@admin.register(Requester)
class RequesterAdmin(admin.ModelAdmin):
    list_display = ("name", "is_admin", "max_active_jobs", "cap", "created_at")
    list_filter = ("is_admin",)
    search_fields = ("name",)
    readonly_fields = ("webhook_secret", "created_at")
    inlines = [ApiTokenInline]

    @admin.display(description="cap in force")
    def cap(self, requester: Requester) -> str:
        """What a submission is checked against: its own max_active_jobs, else the installation default."""
        cap = requester_shard_cap(requester=requester)
        if cap is None:
            return "no limit"
        return str(cap) if requester.max_active_jobs is not None else f"{cap} (default)"
