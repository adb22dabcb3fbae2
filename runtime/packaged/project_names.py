"""A packaged project's top-level names before Trawl's own, in its child: `scrapy startproject demo` (or `sources`,
`scrapyd`, `crawls` ...) deploys a package named like one of Trawl's apps, and Trawl's directory comes first on the
child's sys.path (its crawl components are imported from there). Trawl's packages a child may import are runtime
and those beneath it (tests/test_layers.py keeps runtime from importing any other): every other top-level name is
looked up in the package's environment first, so the project's own package is found, not Trawl's app of that name.
A project named like one of CHILD_PACKAGES still loses to Trawl's (docs/packages.md).

Installed first thing in the child (runtime.packaged.child), before anything imports the project; imports nothing
heavy, so that Scrapy's reactor is installed after it as before.
"""

from __future__ import annotations

import importlib.machinery
import sys
from pathlib import Path

CHILD_PACKAGES = frozenset({"project", "access", "catalog", "items", "registry", "throttling", "callbacks", "runtime"})


class ProjectNamesFirst:
    """A meta path finder: a top-level module that is not one of Trawl's CHILD_PACKAGES comes from the package's
    environment (sys.path without Trawl's directory) when it has one, else from wherever Python finds it."""

    def __init__(self, trawl_dir: Path) -> None:
        self.trawl_dir = trawl_dir.resolve()
        self._path: tuple = ()
        self._others: list[str] = []

    def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if path is not None or name in CHILD_PACKAGES:
            return None
        return importlib.machinery.PathFinder.find_spec(name, self.others())

    def others(self) -> list[str]:
        """sys.path without Trawl's directory, worked out again only when sys.path changed."""
        if tuple(sys.path) != self._path:
            self._path = tuple(sys.path)
            entries = [entry for entry in self._path if isinstance(entry, str) and entry]
            self._others = [entry for entry in entries if Path(entry).resolve() != self.trawl_dir]
        return self._others


def project_names_first(trawl_dir: Path) -> None:
    sys.meta_path.insert(0, ProjectNamesFirst(trawl_dir))
