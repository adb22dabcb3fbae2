"""The project's routes and one more, whose view raises as a view with a bug would (tests/e2e/test_sentry_e2e.py)."""

from django.urls import path
from rest_framework.views import APIView

from project.urls import urlpatterns as project_urlpatterns


class RaisingView(APIView):
    def get(self, request, pk: str):
        authorization = request.headers.get("Authorization")  # a local holding the token: must never be sent
        raise RuntimeError(f"a bug in a view of job {pk} ({len(authorization or '')} characters of credentials)")


urlpatterns = [path("api/jobs/<str:pk>/raising/", RaisingView.as_view()), *project_urlpatterns]
