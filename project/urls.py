from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from project.health import healthz

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("crawls.urls")),
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[]), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema", permission_classes=[]), name="swagger-ui"),
    path("healthz", healthz, name="healthz"),
]
