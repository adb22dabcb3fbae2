"""`manage.py replay JOB_ID --version V`: run version V against the recorded job's responses, here and now, with no
network, and print how its items differ per field. Exit status 0: no difference; 3: items differ; 1: the replay
failed (it opened a socket, the spider raised, it could not run)."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from crawls.models import CrawlJob, JobReplay
from crawls.replays.runs import job_replay_create, job_replay_run
from project.errors import TrawlError


class Command(BaseCommand):
    help = "Replay a recorded job with a version of its scraper (no network) and report the items that differ."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs):
        # `--version` here is the scraper version: replace Django's own `--version` flag (as `crawl` does).
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser) -> None:
        parser.add_argument("job", help="the recorded job's id")
        parser.add_argument(
            "--version", dest="scraper_version", default="", help="the version of the job's scraper to replay with"
        )
        parser.add_argument("--json", action="store_true", help="print the whole report as JSON")

    def handle(self, *args, **opts) -> None:
        if not opts["scraper_version"]:
            raise CommandError("version: --version V is required (the version of the job's scraper to replay with)")
        job = CrawlJob.objects.select_related("scraper").filter(pk=opts["job"]).first()
        if job is None:
            raise CommandError(f"job: no job {opts['job']}")
        try:
            replay = job_replay_run(replay=job_replay_create(job=job, version=opts["scraper_version"], publish=False))
        except TrawlError as exc:
            raise CommandError(f"{exc.field}: {exc.message}") from None
        report = replay.report
        if opts["json"]:
            self.stdout.write(json.dumps({"status": replay.status, "error": replay.error, **report}, indent=2))
        else:
            self.stdout.write(
                f"replay {replay.pk} of job {job.pk} by {job.scraper.name} {opts['scraper_version']}: {replay.status}"
            )
            if replay.error:
                self.stdout.write(f"  {replay.error}")
            if report:
                self.stdout.write(
                    f"  {report['pages']} page(s) in {report['seconds']} s, no network; {report['summary']}"
                )
                for field, found in report.get("fields", {}).items():
                    for example in found["examples"]:
                        self.stdout.write(
                            f"  {field} on {example['item']}: {example['recorded']!r} → {example['replayed']!r}"
                        )
        if replay.status == JobReplay.Status.FAILED:
            raise CommandError(replay.error or "the replay failed", returncode=1)
        if replay.status == JobReplay.Status.DIFFERENT:
            raise CommandError(report.get("summary", "items differ"), returncode=3)
