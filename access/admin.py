from django.contrib import admin

from access.models import ApiToken, Requester


class ApiTokenInline(admin.TabularInline):
    model = ApiToken
    fields = ("prefix", "created_at", "revoked_at")
    readonly_fields = ("prefix", "created_at")
    extra = 0
    can_delete = False


@admin.register(Requester)
class RequesterAdmin(admin.ModelAdmin):
    list_display = ("name", "is_admin", "max_active_jobs", "created_at")
    list_filter = ("is_admin",)
    search_fields = ("name",)
    readonly_fields = ("webhook_secret", "created_at")
    inlines = [ApiTokenInline]
