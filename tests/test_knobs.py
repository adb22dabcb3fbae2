"""A Trawl knob is read one way in Scrapy components: project.knobs.trawl_setting."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings as django_settings
from scrapy.settings import Settings

from project.knobs import trawl_setting

ROOT = Path(__file__).resolve().parent.parent
# A crawl setting read with the project's default written beside it: the second way this test keeps out.
FALLBACK = re.compile(r"""\.get\w*\(\s*["'](TRAWL_[A-Z_]+)["']\s*,\s*[\w.]*settings\.\1""")


def test_the_crawls_value_wins_else_the_projects_default():
    assert trawl_setting(Settings({"TRAWL_STALL_SECONDS": 7}), "TRAWL_STALL_SECONDS") == 7
    assert trawl_setting(Settings({}), "TRAWL_STALL_SECONDS") == django_settings.TRAWL_STALL_SECONDS
    assert trawl_setting(Settings({"TRAWL_STALL_SECONDS": None}), "TRAWL_STALL_SECONDS") == (
        django_settings.TRAWL_STALL_SECONDS
    )


def test_no_scrapy_component_reads_a_knob_with_its_own_fallback():
    offenders = [
        f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
        for folder in ("runtime", "throttling")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for text in [path.read_text()]
        for match in FALLBACK.finditer(text)
    ]
    assert not offenders, f"read these through project.knobs.trawl_setting: {offenders}"
