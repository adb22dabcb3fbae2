"""API input and output shapes for jobs: what a job request may carry, and a job as the API shows it."""

from __future__ import annotations

from django.conf import settings
from django.urls import reverse
from rest_framework import serializers

from crawls.models import SPIDER_NAME_MAX, CrawlJob, JobErrorPage, JobScreenshot
from crawls.selectors import job_screenshot_count
from crawls.services.validation import input_bounds
from items.models import ItemSighting
from project.messaging.brokers import PRIORITY_DEFAULT, PRIORITY_MAX, PRIORITY_MIN
from project.web.serializers import StrictSerializer, http_url
from registry.models import Variant
from runtime.inputs.args import MAX_VALUE_CHARS, SHAPE, SpiderArgsError, spider_args_check
from runtime.inputs.checks import attrs_check, config_check
from runtime.inputs.patterns import MAX_PATTERN_LENGTH, MAX_PATTERNS, PatternError, pattern_compile

MAX_SECONDS = 30 * 86_400  # max_seconds: a month, beyond any job's timeout


def linear_regex(pattern: str) -> None:
    """A requester regex must run on RE2 (linear time): the check the link spider compiles with."""
    try:
        pattern_compile(pattern, field="")
    except PatternError as exc:
        raise serializers.ValidationError(exc.message) from None


def spider_config(config: dict) -> None:
    """The regexes and selectors of a spider config, checked as the spiders run them: {"allow": {"0": [...]}}."""
    try:
        config_check(config, bounds=input_bounds(), prefix="")
    except PatternError as exc:
        raise serializers.ValidationError(nested_error(exc.field, exc.message)) from None


def bounded_attrs(attrs: dict) -> None:
    """`attrs` within TRAWL_ATTRS_MAX_BYTES: it is copied into every item of the job."""
    try:
        attrs_check(attrs, bounds=input_bounds())
    except PatternError as exc:
        raise serializers.ValidationError(exc.message) from None


def nested_error(field: str, message: str) -> dict:
    """`allow.0` → {"allow": {"0": [message]}}: how DRF shapes the errors of nested fields."""
    head, _, rest = field.partition(".")
    return {head: nested_error(rest, message) if rest else [message]}


class ArgumentValue(serializers.CharField):
    """A spider argument's value as sent: a string (a number is refused, not turned into one), spaces kept."""

    def __init__(self, **kwargs) -> None:
        super().__init__(trim_whitespace=False, allow_blank=True, max_length=MAX_VALUE_CHARS, **kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


def spider_args(args: dict) -> None:
    """Names and count of spider arguments, checked as the job's service checks them (runtime/inputs/args.py)."""
    try:
        spider_args_check(args)
    except SpiderArgsError as exc:
        raise serializers.ValidationError(exc.message) from None


def spider_args_field() -> serializers.DictField:
    return serializers.DictField(
        child=ArgumentValue(),
        required=False,
        validators=[spider_args],
        error_messages={"not_a_dict": SHAPE.replace("{", "{{").replace("}", "}}")},  # DRF formats it
        help_text='Spider arguments, as `scrapy crawl -a NAME=VALUE` passes them: {"category": "books"} (strings).',
    )


class JobOptionsSerializer(StrictSerializer):
    """Scrapy Cluster's crawl API, plus `config` for config-driven spiders. Regexes run on RE2 (linear time)."""

    maxdepth = serializers.IntegerField(min_value=0, max_value=20, required=False)
    allowed_domains = serializers.ListField(child=serializers.CharField(max_length=253), max_length=100, required=False)
    allow_regex = serializers.ListField(
        child=serializers.CharField(max_length=MAX_PATTERN_LENGTH, validators=[linear_regex]),
        max_length=MAX_PATTERNS,
        required=False,
        help_text="Follow only links matching one of these (RE2 syntax: no backreferences or lookaround).",
    )
    deny_regex = serializers.ListField(
        child=serializers.CharField(max_length=MAX_PATTERN_LENGTH, validators=[linear_regex]),
        max_length=MAX_PATTERNS,
        required=False,
        help_text="Never follow links matching one of these (RE2 syntax).",
    )
    deny_extensions = serializers.ListField(child=serializers.CharField(max_length=16), max_length=200, required=False)
    expires = serializers.IntegerField(min_value=0, required=False, help_text="Unix time after which to stop.")
    useragent = serializers.CharField(max_length=512, required=False)
    cookie = serializers.CharField(max_length=4096, required=False)
    attrs = serializers.DictField(
        required=False,
        validators=[bounded_attrs],
        help_text=f"Copied into every item (at most {settings.TRAWL_ATTRS_MAX_BYTES} bytes as JSON).",
    )
    render = serializers.BooleanField(
        required=False, help_text="Render every page in headless Chromium before the spider reads it (or never)."
    )
    wait_for = serializers.CharField(
        max_length=500,
        required=False,
        help_text='With `render`: a CSS selector to wait for on each page, or "networkidle".',
    )
    render_timeout = serializers.FloatField(
        min_value=1,
        max_value=settings.TRAWL_RENDER_TIMEOUT_MAX,
        required=False,
        help_text="With `render`: seconds a page's navigation and wait may take.",
    )
    screenshots = serializers.IntegerField(
        min_value=0,
        max_value=settings.TRAWL_RENDER_SCREENSHOTS_MAX,
        required=False,
        help_text="With `render`: keep screenshots of this many first pages (GET /api/jobs/{id}/screenshots/).",
    )
    record = serializers.BooleanField(
        required=False,
        help_text="Keep the job's responses (WARC) to replay a version against them (POST /api/jobs/{id}/replay/).",
    )
    max_pages = serializers.IntegerField(
        min_value=1,
        max_value=settings.TRAWL_JOB_MAX_PAGES_LIMIT,
        required=False,
        help_text="Fetch at most this many pages, then end the job (succeeded, stats `closed_by: max_pages`).",
    )
    max_items = serializers.IntegerField(
        min_value=1,
        max_value=settings.TRAWL_JOB_MAX_ITEMS_LIMIT,
        required=False,
        help_text="Keep at most this many items, then end the job (succeeded, stats `closed_by: max_items`).",
    )
    max_seconds = serializers.FloatField(
        min_value=1,
        max_value=MAX_SECONDS,
        required=False,
        help_text="Crawl for at most this many seconds from the crawl's start, then end the job (succeeded, stats "
        "`closed_by: max_seconds`). Scrapy's CLOSESPIDER_TIMEOUT; the job's timeout still ends it as `timeout`.",
    )
    config = serializers.DictField(
        required=False,
        validators=[spider_config],
        help_text="Spider config, e.g. selectors (XPath without extension functions) or sitemap allow/deny (RE2).",
    )


class JobCreateSerializer(StrictSerializer):
    url = serializers.URLField(
        max_length=2000,
        validators=[http_url],
        required=False,
        help_text="Where the crawl starts. Optional with `spider`: the spider then starts from its own start_urls.",
    )
    spider = serializers.CharField(
        max_length=SPIDER_NAME_MAX,
        required=False,
        help_text="A spider of the version by its Scrapy `name` (a deployed project's `spiders`); default: the "
        "version's own spider.",
    )
    scraper = serializers.SlugField(max_length=100, required=False, help_text="Defaults to the built-in `link`.")
    version = serializers.CharField(max_length=64, required=False)
    variant = serializers.ChoiceField(choices=Variant.choices, required=False)
    priority = serializers.IntegerField(min_value=PRIORITY_MIN, max_value=PRIORITY_MAX, default=PRIORITY_DEFAULT)
    callback_url = serializers.URLField(max_length=2000, required=False, validators=[http_url])
    options = JobOptionsSerializer(required=False)
    args = spider_args_field()
    parallelism = serializers.IntegerField(
        min_value=1,
        max_value=settings.TRAWL_MAX_PARALLELISM,
        default=1,
        help_text="Processes crawling this job at once, sharing one frontier (1..32).",
    )

    def validate(self, attrs: dict) -> dict:
        if not attrs.get("url") and not attrs.get("spider"):
            raise serializers.ValidationError({"url": ["This field is required unless a `spider` is named."]})
        return attrs


class JobSerializer(serializers.ModelSerializer):
    scraper = serializers.CharField(source="scraper.name")
    version = serializers.CharField(source="version.version", default=None)
    variant = serializers.CharField(source="version.variant", default=None)
    error = serializers.CharField(source="error_message")
    duration = serializers.FloatField(allow_null=True)
    items_url = serializers.SerializerMethodField()
    log_url = serializers.SerializerMethodField(help_text="The job's log as text/plain (`?tail=N`, `?level=`).")
    screenshots_url = serializers.SerializerMethodField(help_text="The job's screenshots, each with its `image_url`.")
    screenshot_count = serializers.SerializerMethodField()

    class Meta:
        model = CrawlJob
        fields = [
            "id",
            "url",
            "spider",
            "scraper",
            "version",
            "variant",
            "requested_version",
            "requested_variant",
            "priority",
            "status",
            "attempt",
            "parallelism",
            "worker",
            "queued_at",
            "started_at",
            "finished_at",
            "heartbeat_at",
            "cancel_requested_at",
            "duration",
            "stats",
            "error_class",
            "error",
            "options",
            "args",
            "callback_url",
            "source",
            "items_url",
            "log_url",
            "screenshots_url",
            "screenshot_count",
            "alerts",
        ]

    def get_items_url(self, job: CrawlJob) -> str:
        return self._link(f"/api/jobs/{job.pk}/items/")

    def get_log_url(self, job: CrawlJob) -> str:
        return self._link(f"/api/jobs/{job.pk}/log/")

    def get_screenshots_url(self, job: CrawlJob) -> str:
        return self._link(f"/api/jobs/{job.pk}/screenshots/")

    def get_screenshot_count(self, job: CrawlJob) -> int:
        # Lists come counted (crawls.selectors.jobs_visible); a single job just made or cancelled is counted here.
        counted = getattr(job, "screenshot_count", None)
        return job_screenshot_count(job_id=job.pk) if counted is None else counted

    def _link(self, path: str) -> str:
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path


class JobItemSerializer(serializers.ModelSerializer):
    id = serializers.IntegerField(source="item.id")
    fingerprint = serializers.CharField(source="item.fingerprint")
    url = serializers.CharField(source="item.url")
    data = serializers.JSONField(source="seen_data")  # as this job stored it (items.selectors.sightings_seen)
    first_seen = serializers.DateTimeField(source="item.first_seen")
    last_seen = serializers.DateTimeField(source="item.last_seen")
    changed_at = serializers.DateTimeField(source="item.changed_at")

    class Meta:
        model = ItemSighting
        fields = ["id", "fingerprint", "url", "change", "data", "first_seen", "last_seen", "changed_at"]


class JobScreenshotSerializer(serializers.ModelSerializer):
    image_url = serializers.SerializerMethodField()

    class Meta:
        model = JobScreenshot
        fields = ("id", "url", "reason", "taken_at", "image_url")

    def get_image_url(self, shot: JobScreenshot) -> str:
        path = reverse("job-screenshot", args=[shot.job_id, shot.pk])
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path


class JobErrorPageSerializer(serializers.ModelSerializer):
    kept_bytes = serializers.SerializerMethodField()
    body_url = serializers.SerializerMethodField()

    class Meta:
        model = JobErrorPage
        fields = ("number", "url", "status", "content_type", "size", "kept_bytes", "error", "kept_at", "body_url")

    def get_kept_bytes(self, page: JobErrorPage) -> int:
        return min(page.size, settings.TRAWL_ERROR_PAGE_MAX_BYTES)

    def get_body_url(self, page: JobErrorPage) -> str:
        path = reverse("job-error-page", args=[page.job_id, page.number])
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path
