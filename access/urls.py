"""The API's description: its OpenAPI document and the page that shows it, with the `Token` scheme requesters
authenticate by. Loaded with the URLconf only: workers never import drf-spectacular."""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from access import schema  # noqa: F401  (registers the auth scheme with drf-spectacular)

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(permission_classes=[]), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="schema", permission_classes=[]), name="swagger-ui"),
]
