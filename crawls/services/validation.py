"""Checking job requests before any row exists: the URL, the callback, priority and parallelism, options, and the
registry (the scraper, its version or variant). Every job is checked here, whoever submits it (crawls.services.
lifecycle.jobs_create_many): one submitted over REST, a batch of thousands, a dispatch pass of every due source.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from access.models import Requester
from crawls.models import SPIDER_NAME_MAX
from project.errors import TrawlError
from project.messaging.brokers import PRIORITY_DEFAULT
from project.net import guard_enabled
from project.net.bounded import host_of, resolve_within, target_check_within
from project.validators import priority_check
from registry.models import Scraper, ScraperVersion, Variant
from runtime.inputs.args import SpiderArgsError, spider_args_check
from runtime.inputs.checks import InputBounds, options_check
from runtime.inputs.patterns import PatternError
from throttling.services import throttle_check_url

# What a job spec may carry; `source` only from Trawl's own code (the API's serializers refuse it).
SPEC_FIELDS = (
    "url",
    "spider",
    "scraper",
    "version",
    "variant",
    "priority",
    "callback_url",
    "options",
    "args",
    "parallelism",
    "source",
)


class JobSpecsInvalid(TrawlError):
    """Some specs of a submission are invalid: `errors` maps each one's index to its TrawlError (naming the field)."""

    def __init__(self, errors: dict[int, TrawlError]) -> None:
        first = errors[min(errors)]
        super().__init__(first.message, field=first.field)
        self.errors = errors


def validate_crawl_url(url: str, *, field: str = "url") -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TrawlError(f"{url!r} is not an http(s) URL with a host", field=field)
    return url


def input_bounds() -> InputBounds:
    """The project's bounds on what a job or source may ask for (runtime/inputs/checks.py)."""
    return InputBounds(attrs_bytes=settings.TRAWL_ATTRS_MAX_BYTES, sitemap_urls=settings.TRAWL_SITEMAP_MAX_URLS)


def job_options_validate(options: Any) -> None:
    """A job's options as its spider will run them: regexes on RE2 (linear time), selectors without extension
    functions (runtime/inputs/checks.py, which the spiders use too), `attrs` and `max_urls` within their bounds.
    Raises TrawlError naming `options` and the key."""
    try:
        options_check(options, bounds=input_bounds())
    except PatternError as exc:
        raise TrawlError(str(exc), field="options") from None


def job_args_validate(args: Any) -> None:
    """A job's (or a source's) spider arguments (runtime/inputs/args.py). Raises TrawlError naming `args`."""
    try:
        spider_args_check(args)
    except SpiderArgsError as exc:
        raise TrawlError(exc.message, field="args") from None


class SpecChecker:
    """Checks job specs against the registry, asking it once per scraper, version and variant: a dispatch pass of
    10,000 sources of a few scrapers costs a few queries, not 10,000."""

    def __init__(self, *, requester: Requester | None = None) -> None:
        self.requester = requester
        self.scrapers: dict[str, Scraper | None] = {}
        self.active: dict[tuple[int, str, str], bool] = {}
        self.spiders: dict[tuple[int, str, str], list[dict[str, str]]] = {}
        self.resolved: dict = {}  # host → its checked resolution (project.net.bounded), asked once for all specs

    def check_all(self, specs: list[dict[str, Any]]) -> tuple[list[Scraper | None], dict[int, TrawlError]]:
        """The scraper of each spec (None where invalid) and the error of each invalid one, by index. The guard's
        hosts are resolved first, all at once and within TRAWL_SUBMIT_RESOLVE_SECONDS, not one spec after another."""
        self.resolved.update(resolve_within(self._guarded_hosts(specs)))
        scrapers: list[Scraper | None] = []
        errors: dict[int, TrawlError] = {}
        for index, spec in enumerate(specs):
            try:
                scrapers.append(self.check(spec))
            except TrawlError as exc:
                scrapers.append(None)
                errors[index] = exc
        return scrapers, errors

    def check(self, spec: dict[str, Any]) -> Scraper:
        """Check one job spec; return the scraper it names. Raises TrawlError naming the field.

        With TRAWL_BLOCK_PRIVATE_TARGETS on, callbacks must be public hosts, and so must crawl URLs of non-admin
        requesters (scheduled sources are admin-made)."""
        unknown = sorted(set(spec) - set(SPEC_FIELDS))
        if unknown:
            raise TrawlError("unknown field", field=unknown[0])
        url, spider = spec.get("url") or "", spec.get("spider") or ""
        if not isinstance(spider, str) or len(spider) > SPIDER_NAME_MAX:
            raise TrawlError(f"spider must be a spider's name of at most {SPIDER_NAME_MAX} characters", field="spider")
        # A named spider may start from its own start_urls; the guard checks every request it makes when it fetches.
        if url or not spider:
            self._url_check(url, scheduled=spec.get("source") is not None)
        if callback_url := spec.get("callback_url") or "":
            validate_crawl_url(callback_url, field="callback_url")
            target_check_within(callback_url, field="callback_url", resolved=self.resolved)
        priority_check(spec.get("priority", PRIORITY_DEFAULT))
        parallelism, limit = spec.get("parallelism", 1), settings.TRAWL_MAX_PARALLELISM
        if isinstance(parallelism, bool) or not isinstance(parallelism, int) or not 1 <= parallelism <= limit:
            message = f"parallelism must be an integer between 1 and {limit}, got {parallelism!r}"
            raise TrawlError(message, field="parallelism")
        job_options_validate(spec.get("options"))
        self._proxy_group_check(spec.get("options"))
        job_args_validate(spec.get("args"))
        scraper = self._registry_check(spec.get("scraper") or "", spec.get("version") or "", spec.get("variant") or "")
        if spider:
            self._spider_check(scraper, spider, version=spec.get("version") or "", variant=spec.get("variant") or "")
        return scraper

    def _url_check(self, url: str, *, scheduled: bool) -> None:
        validate_crawl_url(url)
        if self._url_guarded():
            target_check_within(url, field="url", resolved=self.resolved)
        # A scheduled source of a blocked domain must not abort the dispatch of every other source: its crawl fails
        # fast instead (the throttle drops its requests).
        if not scheduled:
            throttle_check_url(url=url)

    def _url_guarded(self) -> bool:
        return self.requester is not None and not self.requester.is_admin

    def _guarded_hosts(self, specs: list[dict[str, Any]]) -> list[str]:
        """The hosts the guard will judge (crawl URLs of non-admin requesters, every callback), when it is on."""
        if not guard_enabled():
            return []
        urls = [spec.get("callback_url") for spec in specs if isinstance(spec, dict)]
        if self._url_guarded():
            urls += [spec.get("url") for spec in specs if isinstance(spec, dict)]
        return [host_of(url) for url in urls if isinstance(url, str) and url]

    def _proxy_group_check(self, options: Any) -> None:
        """A requester's job may name (`options.config.proxy_group`) only a proxy group an admin made public
        (TRAWL_PROXY_GROUPS_PUBLIC): another team's paid or dedicated proxies, with their credentials and egress
        addresses, are not every requester's to use. Admins and scheduled work name any."""
        if self.requester is None or self.requester.is_admin:
            return
        group = ((options or {}).get("config") or {}).get("proxy_group")
        if group in (None, "") or group in settings.TRAWL_PROXY_GROUPS_PUBLIC:
            return
        public = ", ".join(repr(name) for name in settings.TRAWL_PROXY_GROUPS_PUBLIC) or "none"
        message = f"config.proxy_group: {group!r} is not a proxy group requesters may choose (public groups: {public})"
        raise TrawlError(message, field="options")

    def _spider_check(self, scraper: Scraper, spider: str, *, version: str, variant: str) -> None:
        """Refused now when every version the job may route to has its spiders known (a built package) and none is
        named so; otherwise routing checks it (the job fails `routing`)."""
        key = (scraper.pk, version, variant)
        if key not in self.spiders:
            wanted = {"version": version} if version else ({"variant": variant} if variant else {})
            active = ScraperVersion.objects.filter(scraper=scraper, deprecated_at__isnull=True, **wanted)
            self.spiders[key] = [found or {} for found in active.values_list("spiders", flat=True)]
        known = self.spiders[key]
        if known and all(known) and not any(spider in found for found in known):
            names = sorted({name for found in known for name in found})
            message = f"scraper {scraper.name!r} has no spider named {spider!r} (it has: {', '.join(names)})"
            raise TrawlError(message, field="spider")

    def _registry_check(self, scraper_name: str, version: str, variant: str) -> Scraper:
        scraper_name = scraper_name or settings.TRAWL_DEFAULT_SCRAPER
        if scraper_name not in self.scrapers:
            self.scrapers[scraper_name] = Scraper.objects.filter(name=scraper_name).first()
        scraper = self.scrapers[scraper_name]
        if scraper is None:
            raise TrawlError(f"no scraper named {scraper_name!r}", field="scraper")
        if version and not self._has_active(scraper, version=version):
            raise TrawlError(f"scraper {scraper_name!r} has no active version {version!r}", field="version")
        if variant and variant not in Variant.values:
            raise TrawlError(f"variant must be one of {', '.join(Variant.values)}", field="variant")
        if variant and not version and not self._has_active(scraper, variant=variant):
            # Refused now, like an unknown version: accepting it would only fail the job later with `routing`.
            raise TrawlError(f"scraper {scraper_name!r} has no active {variant!r} version", field="variant")
        return scraper

    def _has_active(self, scraper: Scraper, *, version: str = "", variant: str = "") -> bool:
        key = (scraper.pk, version, variant)
        if key not in self.active:
            wanted = {"version": version} if version else {"variant": variant}
            active = ScraperVersion.objects.filter(scraper=scraper, deprecated_at__isnull=True, **wanted)
            self.active[key] = active.exists()
        return self.active[key]
