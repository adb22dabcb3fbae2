from __future__ import annotations

from django.urls import re_path

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

# One scrapy.cfg URL serves both clients: scrapyd-deploy joins `https://trawl.example/scrapyd/` with `addversion.json`,
# scrapyd-client appends `/schedule.json` to it (a double slash).
urlpatterns = [re_path(rf"^(?:/)?{name}\.json$", getattr(views, name), name=f"scrapyd-{name}") for name in ENDPOINTS]
