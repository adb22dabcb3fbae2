from __future__ import annotations

from django.urls import re_path

from scrapyd import files, views

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
# What scrapyd serves beside its API and ScrapydWeb and Gerapy read (scrapyd/files.py).
JOB_PATH = r"(?P<project>[^/]+)/(?P<spider>[^/]+)/(?P<job>[0-9a-f-]{36})"
urlpatterns += [
    re_path(r"^$", files.home_page, name="scrapyd-home"),
    re_path(r"^(?:/)?jobs/?$", files.jobs_page, name="scrapyd-jobs"),
    re_path(rf"^(?:/)?logs/{JOB_PATH}\.(?:log|txt)$", files.log_file, name="scrapyd-log"),
    re_path(rf"^(?:/)?items/{JOB_PATH}\.jl$", files.items_file, name="scrapyd-items"),
]
