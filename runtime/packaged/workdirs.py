"""A working directory of its own for each package child, removed when the child exits.

A project's code writes where it stands: Scrapy's HTTP cache and other data under `.scrapy/` (HTTPCACHE_ENABLED in a
project's settings.py), a pipeline's `open("items.jl", "w")`, a FEEDS entry with a relative path. Run from Trawl's
own directory, every package's child wrote there, into the installation, and read back what another project's crawl
had written: a spider named `books` in two projects shared one HTTP cache, responses fetched with one requester's
cookies served to another's crawl. Each child now starts in an empty directory of its own (mode 0700) in the
system's temporary directory; a worker process killed before removing its children's directories leaves them
behind, and the next child started on that machine removes those of worker processes that no longer run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

logger = logging.getLogger("trawl.packages")
PREFIX = "trawl-child-"
OWNED = re.compile(rf"^{PREFIX}(?P<pid>\d+)-")


def child_workdir_make() -> str:
    """A new, empty directory for a child of this worker process, after removing those dead workers left."""
    _leftovers_remove()
    return tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")


def child_workdir_remove(path: str) -> None:
    if path:
        shutil.rmtree(path, ignore_errors=True)


def _leftovers_remove() -> None:
    root = Path(tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for entry in root.iterdir():
            owner = OWNED.match(entry.name)
            if owner and not _running(int(owner["pid"])) and entry.is_dir() and not entry.is_symlink():
                logger.info("removing %s, the working directory of a package child whose worker is gone", entry)
                shutil.rmtree(entry, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: running, and not ours to clean up after
        return True
    return True
