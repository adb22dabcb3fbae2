"""Operations endpoints at the site's root, mounted by project/urls.py: rolling stats and Prometheus metrics."""

from django.urls import path

from ops.apis import StatsView
from ops.metrics import metrics

urlpatterns = [
    path("api/stats/", StatsView.as_view(), name="stats"),
    path("metrics", metrics, name="metrics"),
]
