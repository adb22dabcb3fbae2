from collections import Counter
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from registry.services.package_import import Outcome, packages_import


class Command(BaseCommand):
    help = (
        "Copy the wheels of packaged versions uploaded before wheels were stored where every host reaches them (the "
        "database, or the S3 bucket TRAWL_PACKAGE_S3_BUCKET names) from the directory they were written to. Run it "
        "once, on the host whose var/packages/ holds them. Idempotent: wheels already in the storage are skipped."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--from",
            dest="directory",
            metavar="DIR",
            default=settings.TRAWL_PACKAGE_DIR,
            help="the old package directory (default: TRAWL_PACKAGE_DIR, var/packages/)",
        )
        parser.add_argument("--dry-run", action="store_true", help="say what would be copied, copy nothing")

    def handle(self, *args, directory, dry_run, **options):
        root = Path(directory)
        if not root.is_dir():
            raise CommandError(f"{root} is not a directory: nothing to import from (see --from)")
        done = packages_import(directory=root, dry_run=dry_run)
        for package, outcome in done:
            verb = "would copy" if dry_run and outcome is Outcome.COPIED else outcome.value
            self.stdout.write(f"{package.path}: {verb}")
        counts = Counter(outcome for _, outcome in done)
        self.stdout.write(
            f"{'would copy' if dry_run else 'copied'} {counts[Outcome.COPIED]}, already stored "
            f"{counts[Outcome.PRESENT]}, missing {counts[Outcome.MISSING]}, differing {counts[Outcome.CHANGED]} "
            f"(of {len(done)} packages) into {settings.TRAWL_PACKAGE_STORAGE!r}"
        )
        if counts[Outcome.MISSING] or counts[Outcome.CHANGED]:
            self.stderr.write(
                "Versions of the missing or differing packages fail to build on a host that has not built them yet; "
                "upload those wheels again as new versions."
            )
