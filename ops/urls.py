"""The operations dashboard, under the admin (staff only: `admin_view` sends anyone else to the login page)."""

from django.contrib import admin
from django.urls import path

from ops.dashboard import dashboard, dashboard_data_json

urlpatterns = [
    path("dashboard/", admin.site.admin_view(dashboard), name="ops-dashboard"),
    path("dashboard/data/", admin.site.admin_view(dashboard_data_json), name="ops-dashboard-data"),
]
