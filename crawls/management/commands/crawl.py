"""`manage.py crawl URL [--scraper S] [--version V] [-a NAME=VALUE]... [--wait]`: submit a job; with --wait, watch it to
the end."""

from __future__ import annotations

import json
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from rich.console import Console

from access.models import Requester
from crawls.live.progress import progress_read
from crawls.logs.joblog import job_log_new_lines
from crawls.management.progress_line import progress_display, progress_line, version_label
from crawls.models import ACTIVE_STATUSES, CrawlJob, JobStatus
from crawls.serializers import JobCreateSerializer
from crawls.services import job_create
from project.errors import TrawlError
from project.messaging.brokers import PRIORITY_DEFAULT, PRIORITY_MAX, PRIORITY_MIN
from project.web.serializers import errors_flat

GENERAL = ("detail", "non_field_errors")  # how DRF names an error of the whole request


def job_spec(opts: dict[str, Any], options: Any) -> dict[str, Any]:
    """The command's flags as the JSON body POST /api/jobs/ takes (flags left empty are left out, as in the API)."""
    spec = {"priority": opts["priority"], "options": options}
    named = {
        "url": opts["url"],
        "spider": opts["spider"],
        "scraper": opts["scraper"],
        "version": opts["scraper_version"],
        "variant": opts["variant"],
        "args": spider_args_parsed(opts.get("spider_args") or []),
    }
    return spec | {name: value for name, value in named.items() if value}


def spider_args_parsed(pairs: list[str]) -> dict[str, str]:
    """`-a NAME=VALUE` flags as `scrapy crawl` reads them: split at the first `=`, the value kept as typed (it may
    hold `=` or be empty); a name given twice keeps its last value."""
    args = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise CommandError(f"args: -a takes NAME=VALUE, got {pair!r}", returncode=2)
        args[name] = value
    return args


def errors_text(detail: Any) -> str:
    """One `field: message` line per error, e.g. `options.bogus: Unknown field.`; an error of no field, its message."""
    lines = errors_flat(detail)
    return "\n".join(message if field in GENERAL else f"{field}: {message}" for field, message in lines)


class Command(BaseCommand):
    help = (
        "Submit a crawl job of URL. Without --wait, print its id. With --wait, show its progress until it ends (the "
        "version that runs it; pages fetched of fetched + still queued; items; how long the throttle held it back), "
        "updated every second; exit 0 if it succeeded, 1 if it failed, was cancelled or died."
    )

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any):
        # `--version` here is the scraper version: replace Django's own `--version` flag.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser) -> None:
        parser.add_argument("url", nargs="?", default="", help="where to start (optional with --spider)")
        parser.add_argument("--spider", default="", help="a spider of the version by its name (scrapy crawl NAME)")
        parser.add_argument("--scraper", default="", help=f"default: {settings.TRAWL_DEFAULT_SCRAPER}")
        parser.add_argument("--version", dest="scraper_version", default="", help="exact scraper version to run")
        parser.add_argument("--variant", default="", help="stable, beta or canary")
        parser.add_argument(
            "--priority",
            type=int,
            default=PRIORITY_DEFAULT,
            help=f"{PRIORITY_MIN}..{PRIORITY_MAX} (default {PRIORITY_DEFAULT})",
        )
        parser.add_argument("--options", default="{}", help="JSON crawl options, e.g. '{\"maxdepth\": 2}'")
        parser.add_argument(
            "-a",
            dest="spider_args",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="a spider argument, as `scrapy crawl -a` takes it (repeatable)",
        )
        parser.add_argument("--requester", default="", help="name of the requester the job belongs to")
        parser.add_argument("--wait", action="store_true", help="watch the job until it ends")
        parser.add_argument("--timeout", type=float, default=0, help="stop waiting after this many seconds")
        parser.add_argument("--interval", type=float, default=1.0, help="seconds between progress updates")
        parser.add_argument("--log", action="store_true", help="with --wait, print the job's log as it grows")

    def handle(self, *args: Any, **opts: Any) -> None:
        job = self.submit(opts)
        if not opts["wait"]:
            self.stdout.write(str(job.pk))
            return
        self.stdout.write(f"job {job.pk} queued: {job.url} (scraper {job.scraper.name}, priority {job.priority})")
        self.follow_log = opts["log"]
        self.last_log_line = ""
        job = self.watch(job, timeout=opts["timeout"], interval=opts["interval"])
        if self.follow_log:
            time.sleep(1)  # the attempt's last records are written just after its end is recorded
            self.print_log(job)
        self.report(job)

    def submit(self, opts: dict[str, Any]) -> CrawlJob:
        """The job, checked by the serializer POST /api/jobs/ uses: what the API refuses, the command refuses, with
        the same messages (`options.maxdepth: Ensure this value is less than or equal to 20.`)."""
        try:
            options = json.loads(opts["options"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"options: not JSON: {exc}", returncode=2) from None
        requester = None
        if opts["requester"]:
            requester = Requester.objects.filter(name=opts["requester"]).first()
            if requester is None:
                raise CommandError(f"requester: no requester named {opts['requester']!r}", returncode=2)
        spec = JobCreateSerializer(data=job_spec(opts, options))
        if not spec.is_valid():
            raise CommandError(errors_text(spec.errors), returncode=2)
        try:
            return job_create(requester=requester, **spec.validated_data)
        except TrawlError as exc:
            raise CommandError(errors_text(exc.as_dict()), returncode=2) from None

    def watch(self, job: CrawlJob, *, timeout: float, interval: float) -> CrawlJob:
        tty = self.stdout.isatty()
        self.console = Console(file=self.stdout._out, force_terminal=tty, highlight=False)
        bar = progress_display(self.console, disable=not tty)
        started, last_seen, last_print = time.monotonic(), None, 0.0
        try:
            with bar:
                task = bar.add_task(version_label(job), total=None, status=job.status, stats={}, elapsed=0.0)
                while True:
                    job, stats = self.current(job, every=interval)
                    if self.follow_log:
                        self.print_log(job)
                    running_for = (time.time() - job.started_at.timestamp()) if job.started_at else 0.0
                    description = version_label(job)
                    bar.update(task, description=description, status=job.status, stats=stats, elapsed=running_for)
                    if not tty and ((job.status, stats) != last_seen or time.monotonic() - last_print > 10):
                        # A log, not a screen: a new line only when something moved.
                        line = progress_line(status=job.status, version=description, stats=stats, elapsed=running_for)
                        self.stdout.write(line)
                        last_print = time.monotonic()
                    last_seen = (job.status, stats)
                    if job.status not in ACTIVE_STATUSES:
                        break
                    if timeout and time.monotonic() - started > timeout:
                        raise CommandError(f"job {job.pk} still {job.status} after {timeout:.0f} s", returncode=3)
                    time.sleep(interval)
        except KeyboardInterrupt:
            raise CommandError(f"stopped watching; job {job.pk} goes on ({job.status})", returncode=130) from None
        return job

    def current(self, job: CrawlJob, *, every: float) -> tuple[CrawlJob, dict[str, Any]]:
        """The job, and its freshest numbers: the running crawl's live progress (every second while watched: this
        reading, back in `every` s, keeps it watched) over the row's (every heartbeat)."""
        job = CrawlJob.objects.select_related("scraper", "version").get(pk=job.pk)
        live = progress_read(job_id=job.pk, every=every) if job.status == JobStatus.RUNNING else None
        return job, live or job.stats or {}

    def print_log(self, job: CrawlJob) -> None:
        """Print the job's log records not printed yet (above the progress bar on a terminal)."""
        lines = job_log_new_lines(job=job, after=self.last_log_line)
        for line in lines:
            self.console.print(line, markup=False, soft_wrap=True)
        self.last_log_line = lines[-1] if lines else self.last_log_line

    def report(self, job: CrawlJob) -> None:
        stats = job.stats or {}
        took = f"{job.duration:.1f} s" if job.duration is not None else "no time"
        summary = (
            f"job {job.pk} {job.status} in {took}: {stats.get('pages', 0)} pages, {stats.get('items', 0)} items "
            f"({stats.get('items_new', 0)} new, {stats.get('items_changed', 0)} changed, "
            f"{stats.get('items_unchanged', 0)} unchanged)"
        )
        if job.status != JobStatus.SUCCEEDED:
            raise CommandError(f"{summary} — {job.error_class}: {job.error_message}", returncode=1)
        self.stdout.write(self.style.SUCCESS(summary))
