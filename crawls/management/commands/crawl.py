"""`manage.py crawl URL [--scraper S] [--version V] [--wait]`: submit a job; with --wait, watch it to the end."""

from __future__ import annotations

import json
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from access.models import Requester
from crawls.models import ACTIVE_STATUSES, CrawlJob, JobStatus
from crawls.services import job_create
from crawls.timeouts import job_timeout
from ops.joblog import job_log_new_lines
from ops.stats import throttle_numbers
from project.errors import TrawlError

BAR_WIDTH = 24


def progress_line(*, status: str, stats: dict[str, Any], elapsed: float, limit: float, width: int = BAR_WIDTH) -> str:
    """One line of progress: a bar of the time used out of the job's timeout, then pages, items, throttle waits."""
    filled = 0 if status == JobStatus.QUEUED else min(width, int(width * elapsed / limit)) if limit else 0
    bar = "#" * filled + "-" * (width - filled)
    items_new, items_changed = stats.get("items_new", 0), stats.get("items_changed", 0)
    items = stats.get("items", items_new + items_changed + stats.get("items_unchanged", 0))
    throttle = throttle_numbers(stats)
    return (
        f"{status:<9} [{bar}] {_clock(elapsed)}/{_clock(limit)}  pages {stats.get('pages', 0)}  "
        f"items {items} ({items_new} new, {items_changed} changed)  "
        f"throttle waits {throttle['waits']} ({throttle['wait_seconds']:.1f} s)"
    )


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"


class Command(BaseCommand):
    help = (
        "Submit a crawl job of URL. Without --wait, print its id. With --wait, show a live progress bar (pages, items, "
        "throttle waits) until it ends; exit 0 if it succeeded, 1 if it failed, was cancelled or died."
    )

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any):
        # `--version` here is the scraper version: replace Django's own `--version` flag.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser) -> None:
        parser.add_argument("url")
        parser.add_argument("--scraper", default="", help=f"default: {settings.TRAWL_DEFAULT_SCRAPER}")
        parser.add_argument("--version", dest="scraper_version", default="", help="exact scraper version to run")
        parser.add_argument("--variant", default="", help="stable, beta or canary")
        parser.add_argument("--priority", type=int, default=50, help="1..100 (default 50)")
        parser.add_argument("--options", default="{}", help="JSON crawl options, e.g. '{\"maxdepth\": 2}'")
        parser.add_argument("--requester", default="", help="name of the requester the job belongs to")
        parser.add_argument("--wait", action="store_true", help="watch the job until it ends")
        parser.add_argument("--timeout", type=float, default=0, help="stop waiting after this many seconds")
        parser.add_argument("--interval", type=float, default=0.5, help="seconds between progress updates")
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
            self.print_log(job, tty=False)
        self.report(job)

    def submit(self, opts: dict[str, Any]) -> CrawlJob:
        try:
            options = json.loads(opts["options"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--options is not JSON: {exc}", returncode=2) from None
        requester = None
        if opts["requester"]:
            requester = Requester.objects.filter(name=opts["requester"]).first()
            if requester is None:
                raise CommandError(f"no requester named {opts['requester']!r}", returncode=2)
        try:
            return job_create(
                url=opts["url"],
                scraper=opts["scraper"],
                version=opts["scraper_version"],
                variant=opts["variant"],
                priority=opts["priority"],
                options=options,
                requester=requester,
            )
        except TrawlError as exc:
            raise CommandError(f"{exc.field or 'job'}: {exc.message}", returncode=2) from None

    def watch(self, job: CrawlJob, *, timeout: float, interval: float) -> CrawlJob:
        tty = self.stdout.isatty()
        started, last_seen, last_print = time.monotonic(), None, 0.0
        try:
            while True:
                job = CrawlJob.objects.select_related("version").get(pk=job.pk)
                running_for = (time.time() - job.started_at.timestamp()) if job.started_at else 0.0
                limit = job_timeout(job)
                if self.follow_log:
                    self.print_log(job, tty=tty)
                line = progress_line(status=job.status, stats=job.stats or {}, elapsed=running_for, limit=limit)
                if tty:
                    self.stdout.write(f"\r{line}\x1b[K", ending="")
                    self.stdout.flush()
                elif (job.status, job.stats) != last_seen or time.monotonic() - last_print > 10:
                    self.stdout.write(line)  # a log, not a screen: a new line only when something moved
                    last_print = time.monotonic()
                last_seen = (job.status, job.stats)
                if job.status not in ACTIVE_STATUSES:
                    break
                if timeout and time.monotonic() - started > timeout:
                    raise CommandError(f"\njob {job.pk} still {job.status} after {timeout:.0f} s", returncode=3)
                time.sleep(interval)
        except KeyboardInterrupt:
            raise CommandError(f"\nstopped watching; job {job.pk} goes on ({job.status})", returncode=130) from None
        if tty:
            self.stdout.write("")
        return job

    def print_log(self, job: CrawlJob, *, tty: bool) -> None:
        """Print the job's log records not printed yet, above the progress line."""
        lines = job_log_new_lines(job=job, after=self.last_log_line)
        if lines and tty:
            self.stdout.write("\r\x1b[K", ending="")
        for line in lines:
            self.stdout.write(line)
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
