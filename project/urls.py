from django.contrib import admin
from django.urls import include, path

from project.web.health import healthz
from project.web.root import api_root, landing

handler404 = "project.errors.not_found"

urlpatterns = [
    path("", landing, name="landing"),
    path("api/", api_root, name="api-root"),
    # Before admin.site.urls, whose catch-all would answer 404 for it.
    path("admin/ops/", include("ops.urls")),
    path("admin/", admin.site.urls),
    # Before the api/ includes: /api/stats/ is ops' (with /metrics).
    path("", include("ops.api_urls")),
    path("api/", include("crawls.urls")),
    path("api/", include("sources.urls")),
    path("api/", include("throttling.urls")),
    path("api/", include("items.urls")),
    path("api/", include("registry.urls")),
    path("api/", include("access.urls")),  # the OpenAPI document and its page
    path("scrapyd/", include("scrapyd.urls")),  # scrapyd's JSON API, for scrapyd-deploy and its other clients
    path("healthz", healthz, name="healthz"),
]
