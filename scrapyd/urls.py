from __future__ import annotations

from django.urls import path

from scrapyd import views

ENDPOINTS = (
    "daemonstatus",
    "addversion",
    "schedule",
    "cancel",
    "status",
    "listprojects",
    "listversions",
    "listspiders",
    "listjobs",
    "delversion",
    "delproject",
)

urlpatterns = [path(f"{name}.json", getattr(views, name), name=f"scrapyd-{name}") for name in ENDPOINTS]
