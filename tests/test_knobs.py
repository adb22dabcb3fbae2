"""One settings path: Trawl's values for a crawl are composed once into its Scrapy settings
(runtime.settings.compose), and Scrapy components read `crawler.settings` only, with no default of their own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from django.conf import settings as django_settings

from runtime.settings.compose import KNOBS, PROJECT_PINS, with_pins, with_trawl_defaults

ROOT = Path(__file__).resolve().parent.parent
COMPOSER = "runtime/settings/compose.py"
COMPONENT_FOLDERS = ("runtime", "throttling", "items")
# A crawl setting read with a default written beside it: the second place for a default this test keeps out.
FALLBACK = re.compile(r"""\.get\w*\(\s*["'](TRAWL_[A-Z_]+)["']\s*,""")


def modules(*folders: str) -> list[tuple[str, ast.Module]]:
    return [
        (str(path.relative_to(ROOT)), ast.parse(path.read_text()))
        for folder in folders
        for path in sorted((ROOT / folder).rglob("*.py"))
    ]


def reads_django_conf(tree: ast.Module) -> bool:
    """Imports django.conf anywhere in the module (at the top, inside a function, under TYPE_CHECKING)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        if any(name.startswith("django.conf") for name in names):
            return True
    return False


def is_scrapy_component(tree: ast.Module) -> bool:
    """Defines a class built by Scrapy: one with a from_crawler (or from_settings)."""
    return any(
        isinstance(node, ast.ClassDef)
        and any(
            isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in ("from_crawler", "from_settings")
            for item in node.body
        )
        for node in ast.walk(tree)
    )


def test_only_the_composer_reads_django_conf_in_the_runtime():
    readers = [path for path, tree in modules("runtime") if reads_django_conf(tree)]
    assert readers == [COMPOSER], f"take these values from crawler.settings or from the caller: {readers}"


def test_no_scrapy_component_reads_django_conf_or_a_knob_helper():
    offenders = [
        path
        for path, tree in modules(*COMPONENT_FOLDERS)
        if path != COMPOSER
        and is_scrapy_component(tree)
        and (reads_django_conf(tree) or "trawl_setting" in ast.unparse(tree))
    ]
    assert not offenders, (
        f"read crawler.settings in from_crawler (runtime.settings.compose puts the value there): {offenders}"
    )


def test_no_scrapy_component_reads_a_knob_with_its_own_fallback():
    offenders = [
        f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
        for folder in (*COMPONENT_FOLDERS, "crawls")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for text in [path.read_text()]
        for match in FALLBACK.finditer(text)
    ]
    assert not offenders, f"the default belongs in project/trawl_settings.py (composed by compose.py): {offenders}"


def test_every_knob_and_pin_has_its_one_default_in_the_projects_settings():
    assert not set(KNOBS) & set(PROJECT_PINS)
    assert all(hasattr(django_settings, name) for name in (*KNOBS, *PROJECT_PINS))


def test_a_crawls_knob_wins_and_its_pins_do_not(settings):
    settings.TRAWL_STALL_SECONDS, settings.TRAWL_EGRESS_LABEL = 600, "worker-1"
    composed = with_pins(with_trawl_defaults({"TRAWL_STALL_SECONDS": 7, "TRAWL_EGRESS_LABEL": "mine"}))
    assert (composed["TRAWL_STALL_SECONDS"], composed["TRAWL_EGRESS_LABEL"]) == (7, "worker-1")
    composed = with_pins(with_trawl_defaults({"TRAWL_STALL_SECONDS": None}))
    assert composed["TRAWL_STALL_SECONDS"] == 600
    assert set(KNOBS) | set(PROJECT_PINS) <= set(composed)
