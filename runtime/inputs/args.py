"""Spider arguments: a job's `args`, handed to its spider as keyword arguments, as scrapyd's schedule.json and
`scrapy crawl -a NAME=VALUE` pass them (strings; Scrapy's Spider stores each as an attribute of the spider).

They are a requester's input: never evaluated, never settings. A name Trawl passes itself (`url`, `options`...), a
name Scrapy's Spider defines, or one Scrapy reads off a spider as a crawl setting (`download_delay`, `user_agent`,
`download_maxsize`...) is refused, so an argument can neither replace what Trawl hands the spider nor change how the
crawl is run: those are the version's settings, or the job's `options`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SHAPE = 'args is an object of strings, e.g. {"category": "books"}'
MAX_ARGS = 50
MAX_NAME_CHARS = 100
MAX_VALUE_CHARS = 10_000
# What Trawl passes every spider itself (crawls.services.execution): an argument never replaces one of them.
TRAWL_KWARGS = ("url", "start_urls", "options", "config", "strategy")
# What scrapy.Spider defines, and the spider attributes Scrapy reads as the crawl's settings (its downloader, its
# download-timeout, user-agent, auth, compression, redirect and offsite middlewares).
SCRAPY_ATTRIBUTES = (
    "name",
    "crawler",
    "settings",
    "custom_settings",
    "allowed_domains",
    "start",
    "start_requests",
    "parse",
    "close",
    "closed",
    "log",
    "logger",
    "from_crawler",
    "update_settings",
    "handles_request",
    "state",
    "download_delay",
    "max_concurrent_requests",
    "download_maxsize",
    "download_warnsize",
    "download_timeout",
    "user_agent",
    "http_user",
    "http_pass",
    "http_auth_domain",
    "handle_httpstatus_list",
    "handle_httpstatus_all",
)


class SpiderArgsError(ValueError):
    """Arguments Trawl will not hand a spider; the message names the argument."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def spider_args_check(args: Any) -> None:
    """An object of at most MAX_ARGS string values, each named by a Python identifier that is not Trawl's or
    Scrapy's. Raises SpiderArgsError."""
    if args is None:
        return
    if not isinstance(args, Mapping):
        raise SpiderArgsError(SHAPE)
    if len(args) > MAX_ARGS:
        raise SpiderArgsError(f"at most {MAX_ARGS} arguments, got {len(args)}")
    for name, value in args.items():
        spider_arg_name_check(name)
        if not isinstance(value, str):
            raise SpiderArgsError(f"{name}: a spider argument is a string (as `-a {name}=...` passes it)")
        if len(value) > MAX_VALUE_CHARS:
            raise SpiderArgsError(f"{name}: at most {MAX_VALUE_CHARS} characters, got {len(value)}")
        if "\x00" in value:
            raise SpiderArgsError(f"{name}: a NUL character is not allowed")


def spider_arg_name_check(name: Any) -> None:
    if not isinstance(name, str) or len(name) > MAX_NAME_CHARS or not name.isidentifier() or name.startswith("_"):
        raise SpiderArgsError(
            f"{repr(name)[:60]} is not an argument name: a Python identifier of at most {MAX_NAME_CHARS} characters, "
            "not starting with `_`"
        )
    if name in TRAWL_KWARGS:
        raise SpiderArgsError(f"{name}: Trawl passes this one itself (the job's {name}); choose another name")
    if name in SCRAPY_ATTRIBUTES:
        raise SpiderArgsError(f"{name}: Scrapy reads this spider attribute itself; set it in the version's settings")
