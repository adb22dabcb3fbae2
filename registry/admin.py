from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import Http404
from django.urls import path, reverse
from django.utils.html import format_html

from project.errors import TrawlError
from registry.admin_views import compare_view, redirect_back, set_traffic_view
from registry.forms import VersionForm, VersionInlineFormSet
from registry.models import Scraper, ScraperVersion
from registry.selectors import by_semver
from registry.services import version_deprecate, version_promote, versions_save
from registry.services.packages import version_upload


def state_badge(version: ScraperVersion):
    if version.pk is None:
        return "–"
    if version.rolled_back_at and version.is_active:
        return format_html(
            '<b style="color:#dc3545" title="{}">rolled back {}</b><br><small>{}</small>',
            version.rollback_reason,
            f"{version.rolled_back_at:%Y-%m-%d %H:%M} UTC",
            version.rollback_reason,
        )
    colour = "#6c757d" if version.deprecated_at else "#198754"
    return format_html('<b style="color:{}">{}</b>', colour, version.state)


class ScraperVersionInline(admin.TabularInline):
    model = ScraperVersion
    formset = VersionInlineFormSet
    fields = ("version", "variant", "spider", "is_default", "traffic_pct", "min_priority", "status", "deprecated_at")
    readonly_fields = ("status", "deprecated_at")
    extra = 0
    can_delete = False  # deprecate instead: a version's jobs keep pointing at it
    show_change_link = True

    @admin.display(description="status")
    def status(self, version: ScraperVersion):
        return state_badge(version)


@admin.register(Scraper)
class ScraperAdmin(admin.ModelAdmin):
    list_display = ("name", "description", "traffic", "version_count", "compare_link", "created_at")
    search_fields = ("name", "description")
    inlines = [ScraperVersionInline]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_versions=Count("versions")).prefetch_related("versions")

    def get_urls(self):
        compare = self.admin_site.admin_view(self.compare)
        name = f"{self.opts.app_label}_{self.opts.model_name}_compare"
        return [path("<path:object_id>/compare/", compare, name=name), *super().get_urls()]

    def compare(self, request, object_id):
        scraper = self.get_object(request, unquote(object_id))
        if scraper is None:
            raise Http404(f"no scraper with id {object_id!r}")
        if not self.has_view_permission(request, scraper):
            raise PermissionDenied
        return compare_view(self, request, scraper)

    @admin.display(description="versions", ordering="n_versions")
    def version_count(self, scraper: Scraper) -> int:
        return scraper.n_versions

    @admin.display(description="traffic")
    def traffic(self, scraper: Scraper) -> str:
        live = [v for v in by_semver(scraper.versions.all()) if v.traffic_pct and v.is_active]
        return ", ".join(f"{v.version} {v.traffic_pct}%" for v in live) or "all to the default"

    @admin.display(description="compare")
    def compare_link(self, scraper: Scraper):
        return format_html(
            '<a href="{}">compare versions</a>', reverse("admin:registry_scraper_compare", args=[scraper.pk])
        )

    def save_formset(self, request, form, formset, change):
        if formset.model is not ScraperVersion:
            return super().save_formset(request, form, formset, change)
        # Through the same service as the API: validated together, then saved; traffic_pct sums checked once.
        versions_save(scraper=form.instance, versions=formset.save(commit=False))
        formset.save_m2m()
        return None


@admin.register(ScraperVersion)
class ScraperVersionAdmin(admin.ModelAdmin):
    form = VersionForm
    list_display = (
        "scraper",
        "version",
        "variant",
        "traffic_pct",
        "is_default",
        "min_priority",
        "status",
        "package_status",
        "created_at",
    )
    list_filter = ("variant", "is_default", ("rolled_back_at", admin.EmptyFieldListFilter), "scraper")
    search_fields = ("scraper__name", "version", "spider")
    readonly_fields = (
        "status",
        "created_at",
        "deprecated_at",
        "rollout_started_at",
        "rolled_back_at",
        "rollback_reason",
        "package",
        "package_status",
        "package_log",
    )
    actions = ["deprecate", "promote_to_stable", "set_traffic"]

    def get_readonly_fields(self, request, obj=None):
        # Renaming a version or moving it to another scraper would rewrite the history of the jobs it ran.
        return (*self.readonly_fields, "scraper", "version") if obj else self.readonly_fields

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def has_delete_permission(self, request, obj=None) -> bool:
        # Only a version that never ran may go; others are deprecated so their jobs keep their history.
        return super().has_delete_permission(request, obj) and (obj is None or not obj.jobs.exists())

    @admin.display(description="status")
    def status(self, version: ScraperVersion):
        return state_badge(version)

    def get_exclude(self, request, obj=None):
        # The code of an existing version never changes: upload a new version instead.
        return ("package_file",) if obj else ()

    def save_model(self, request, obj, form, change):
        upload = form.cleaned_data.get("package_file")
        if change or not upload:
            versions_save(scraper=obj.scraper, versions=[obj])
            return
        fields = ("version", "spider", "variant", "is_default", "traffic_pct", "min_priority", "settings")
        created = version_upload(
            scraper=obj.scraper, package=upload, filename=upload.name, **{name: getattr(obj, name) for name in fields}
        )
        obj.pk, obj.package, obj.package_status = created.pk, created.package, created.package_status

    @admin.action(description="Deprecate selected versions (never route again)", permissions=["change"])
    def deprecate(self, request, queryset):
        for version in queryset.select_related("scraper"):
            try:
                version_deprecate(version=version)
            except TrawlError as exc:
                self.message_user(request, f"{version}: {exc.message}", messages.ERROR)
            else:
                self.message_user(request, f"Deprecated {version}. Workers stop routing to it within seconds.")
        return redirect_back(request)

    @admin.action(description="Promote to stable (default, 100%% of traffic)", permissions=["change"])
    def promote_to_stable(self, request, queryset):
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one version to promote.", messages.ERROR)
            return redirect_back(request)
        version = queryset.select_related("scraper").get()
        try:
            version_promote(version=version)
        except TrawlError as exc:
            self.message_user(request, f"{version}: {exc.message}", messages.ERROR)
        else:
            self.message_user(request, f"{version.scraper.name} {version.version} is now stable, default, 100%.")
        return redirect_back(request)

    @admin.action(description="Set traffic…", permissions=["change"])
    def set_traffic(self, request, queryset):
        return set_traffic_view(self, request, queryset)
