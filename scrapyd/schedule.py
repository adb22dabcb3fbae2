"""schedule.json's parameters as a Trawl job request: `_version`, `priority`, `setting=K=V` and spider arguments."""

from __future__ import annotations

from typing import Any

from project.messaging.brokers import PRIORITY_DEFAULT, PRIORITY_MAX, PRIORITY_MIN
from scrapyd.web import ScrapydError

# The Scrapy settings a job may set through scrapyd's `setting=`, and the job option each one is. The others are the
# project's (its settings module) or the version's to set; Trawl pins some (robots, politeness) for every job.
JOB_SETTINGS = {
    "USER_AGENT": ("useragent", str),
    "DEPTH_LIMIT": ("maxdepth", int),
    # Scrapy's CloseSpider limits are the job's own page, item and time limits (0, Scrapy's "no limit", sets none).
    # ScrapydWeb's run form sends CLOSESPIDER_TIMEOUT=60 and CLOSESPIDER_PAGECOUNT=10 unless its user clears them.
    "CLOSESPIDER_PAGECOUNT": ("max_pages", int),
    "CLOSESPIDER_ITEMCOUNT": ("max_items", int),
    "CLOSESPIDER_TIMEOUT": ("max_seconds", float),
}
UNLIMITED = {"max_pages", "max_items", "max_seconds"}  # options whose 0 means no limit, as in Scrapy
# `jobid` is Trawl's to choose: one sent (ScrapydWeb always sends a timestamp) is not a spider argument, and the
# answer's `jobid` is the job's id.
SCRAPYD_PARAMS = {"project", "spider", "_version", "priority", "jobid", "setting"}


def job_priority(value: str) -> int:
    """scrapyd's priority (a float, 0 by default, higher runs sooner) on Trawl's scale around PRIORITY_DEFAULT."""
    try:
        wanted = PRIORITY_DEFAULT + round(float(value or 0))
    except ValueError:
        raise ScrapydError(f"priority must be a number, not {value!r}") from None
    return min(max(wanted, PRIORITY_MIN), PRIORITY_MAX)


def job_options(settings: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for setting in settings:
        name, equals, value = setting.partition("=")
        if not equals:
            raise ScrapydError(f"setting {setting!r} is not NAME=VALUE")
        if name not in JOB_SETTINGS:
            allowed = ", ".join(sorted(JOB_SETTINGS))
            raise ScrapydError(
                f"a job may not set {name} on Trawl (it may set {allowed}): put it in the project's settings "
                "module, or in the version's settings (PATCH /api/scrapers/{name}/versions/{v}/)"
            )
        option, kind = JOB_SETTINGS[name]
        try:
            options[option] = kind(value)
        except ValueError:
            raise ScrapydError(f"setting {name} must be a {kind.__name__}, not {value!r}") from None
        if option in UNLIMITED and options[option] == 0:
            del options[option]
    return options


def job_request(params) -> dict[str, Any]:
    """The JobCreateSerializer data for schedule.json's parameters (the version is resolved by the caller)."""
    request: dict[str, Any] = {
        "scraper": params.get("project", ""),
        "spider": params.get("spider", ""),
        "priority": job_priority(params.get("priority", "")),
    }
    options = job_options(params.getlist("setting"))
    if options:
        request["options"] = options
    args = {name: params.getlist(name)[-1] for name in params if name not in SCRAPYD_PARAMS}
    if args:
        request["args"] = args
    return request
