from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

# Registers the OpenAPI auth scheme; here, not in AccessConfig.ready: workers never load the URLconf, nor need it.
from access import schema  # noqa: F401
from ops.apis import StatsView
from project.health import healthz
from project.metrics import metrics
from project.root import api_root, landing

handler404 = "project.errors.not_found"

urlpatterns = [
    path("", landing, name="landing"),
    path("api/", api_root, name="api-root"),
    # Before admin.site.urls, whose catch-all would answer 404 for it.
    path("admin/ops/", include("ops.urls")),
    path("admin/", admin.site.urls),
    path("api/stats/", StatsView.as_view(), name="stats"),
    path("api/", include("crawls.urls")),
    path("api/", include("sources.urls")),
    path("api/", include("throttling.urls")),
    path("api/", include("items.urls")),
    path("api/", include("registry.urls")),
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[]), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema", permission_classes=[]), name="swagger-ui"),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
]
