"""`manage.py deploy [PROJECT_DIR]`: ship a Scrapy project as a new packaged version, like scrapyd-deploy or `shub
deploy`.

Builds the project's wheel (a `scrapy startproject` layout as it is: a setup is generated in the build copy),
registers it with every spider of the project (here, or on a remote Trawl with --url/--token or
TRAWL_URL/TRAWL_TOKEN), waits until a worker has built it, makes a stable deploy the scraper's default and prints how
to crawl with it.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from project.errors import TrawlError
from registry.deploy.deploying import DeployRequest, build_wait, deploy_run, go_live
from registry.deploy.targets import LocalTarget, RemoteTarget, Target
from registry.models import Variant


class Command(BaseCommand):
    help = (
        "Build a wheel from a Scrapy project (its pyproject.toml or setup.py, or one generated in the build copy) and "
        "register it, every spider by its name, as a new packaged version of a scraper (created if new); wait until "
        "a worker has built it; a stable deploy then becomes the default (not with --variant canary or --traffic); "
        "print a crawl command."
    )

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any):
        # `--version` here is the scraper version: replace Django's own `--version` flag (as `crawl` does).
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser) -> None:
        parser.add_argument("project", nargs="?", default=".", help="the Scrapy project's directory (default: .)")
        parser.add_argument(
            "--scraper",
            default="",
            help="scraper name, created if it does not exist (default: scrapy.cfg's [deploy] project, else the "
            "settings module's package)",
        )
        which = parser.add_mutually_exclusive_group()
        which.add_argument(
            "--version",
            dest="scraper_version",
            default="",
            help="version to register, e.g. 1.2.0 (default: the project's own if unused, else the latest's next patch)",
        )
        which.add_argument(
            "--bump", choices=["patch", "minor", "major"], help="the scraper's latest version + 1 (first: 1.0.0)"
        )
        parser.add_argument(
            "--spider",
            default="",
            help="the spider a job that names none runs: its name or dotted class path (default: the only one, or "
            "the first by name); every spider of the project is registered",
        )
        parser.add_argument(
            "--variant", choices=Variant.values, default=Variant.STABLE, help="stable (default) goes live when built"
        )
        parser.add_argument("--traffic", type=int, default=0, help="share of unpinned jobs, 0..100 (not live)")
        parser.add_argument("--default", action="store_true", help="make it the default as it is uploaded")
        parser.add_argument("--scrapy-settings", default="{}", help='version settings, JSON: {"DOWNLOAD_DELAY": 1}')
        parser.add_argument("--url", default=os.environ.get("TRAWL_URL", ""), help="a remote Trawl (or TRAWL_URL)")
        parser.add_argument(
            "--token",
            default="",
            help="admin token; visible to every user of this machine in `ps` while deploy runs: prefer TRAWL_TOKEN "
            "or --token-file",
        )
        parser.add_argument(
            "--token-file",
            default=os.environ.get("TRAWL_TOKEN_FILE", ""),
            help="a file holding the admin token (or TRAWL_TOKEN_FILE); else the TRAWL_TOKEN environment variable",
        )
        parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for the build (default 600)")

    def handle(self, *args, **options) -> None:
        request = DeployRequest(
            directory=Path(options["project"]),
            scraper=options["scraper"],
            version=options["scraper_version"],
            bump=options["bump"] or "",
            spider=options["spider"],
            variant=options["variant"],
            traffic_pct=options["traffic"],
            is_default=options["default"],
            settings=_settings(options["scrapy_settings"]),
        )
        try:
            target: Target = RemoteTarget(options["url"], _token(options)) if options["url"] else LocalTarget()
            deployed = deploy_run(request=request, target=target, say=self.stdout.write)
            scraper, version = deployed.scraper, deployed.version["version"]
            self.stdout.write(f"waiting for a worker to build {scraper} {version} ...")
            ready = build_wait(target=target, scraper=scraper, version=version, timeout=options["timeout"])
            self.stdout.write(self.style.SUCCESS(f"{scraper} {version} is ready"))
            if ready.get("spiders"):
                self.stdout.write(f"spiders: {', '.join(sorted(ready['spiders']))}")
            if request.goes_live:
                go_live(target=target, deployed=deployed, say=self.stdout.write)
        except TrawlError as exc:
            raise CommandError(exc.message) from None
        spider = deployed.spider
        self.stdout.write(_crawl_command(options["url"], scraper, version, spider.start_url, spider.name))


def _settings(text: str) -> dict:
    try:
        settings = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"--scrapy-settings is not valid JSON: {exc}") from None
    if not isinstance(settings, dict):
        raise CommandError("--scrapy-settings must be a JSON object")
    return settings


def _crawl_command(url: str, scraper: str, version: str, start: str, spider: str) -> str:
    """A job of the version's own spider: by its name from its own start_urls when it has both, else at a URL."""
    by_name = bool(spider and start)
    if not url:
        where = ["--spider", spider] if by_name else [start or "URL"]
        args = shlex.join([*where, "--scraper", scraper, "--version", version, "--wait"])
        return f"crawl with it:\n  .venv/bin/python manage.py crawl {args}"
    body = json.dumps(
        {**({"spider": spider} if by_name else {"url": start or "URL"}), "scraper": scraper, "version": version}
    )
    return (
        "crawl with it:\n"
        f"  curl -s -H \"Authorization: Token $TRAWL_TOKEN\" -H 'Content-Type: application/json' \\\n"
        f"    -d {shlex.quote(body)} {url.rstrip('/')}/api/jobs/"
    )


def _token(options: dict[str, Any]) -> str:
    """The admin token of a remote Trawl: --token, else --token-file (TRAWL_TOKEN_FILE), else TRAWL_TOKEN. A token
    on the command line is in every process listing of the machine; a file or the environment is not."""
    if options["token"]:
        return options["token"]
    if options["token_file"]:
        try:
            return Path(options["token_file"]).read_text().strip()
        except OSError as exc:
            raise CommandError(f"--token-file: cannot read {options['token_file']}: {exc.strerror}") from None
    return os.environ.get("TRAWL_TOKEN", "").strip()
