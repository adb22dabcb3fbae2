"""`manage.py trawl_cleanup [--days N] [--dry-run]`: what beat's `cleanup-jobs` does, on demand, saying what goes."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from crawls.models import CrawlJob
from ops.retention import jobs_cleanup


class Command(BaseCommand):
    help = (
        "Delete finished jobs older than --days (default TRAWL_RETENTION_DAYS) with their logs, sightings, attempts "
        "and webhook deliveries. Items stay, and so does each source's last finished job."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--days", type=float, default=None, help=f"default: {settings.TRAWL_RETENTION_DAYS}")
        parser.add_argument("--dry-run", action="store_true", help="list and count, delete nothing")

    def handle(self, *args: Any, **opts: Any) -> None:
        days = settings.TRAWL_RETENTION_DAYS if opts["days"] is None else opts["days"]
        if days < 0:
            raise CommandError("--days must be 0 or more", returncode=2)
        verb = "would remove" if opts["dry_run"] else "removing"
        totals = jobs_cleanup(days=days, dry_run=opts["dry_run"], on_job=lambda job: self._line(verb, job))
        summary = ", ".join(f"{count} {kind}" for kind, count in totals.items())
        done = "would remove" if opts["dry_run"] else "removed"
        self.stdout.write(f"{done} (finished more than {days:g} days ago): {summary}")

    def _line(self, verb: str, job: CrawlJob) -> None:
        finished = job.finished_at.isoformat(timespec="seconds") if job.finished_at else "-"
        self.stdout.write(f"{verb} job {job.pk} {job.status} finished {finished} {job.url}")
