"""The one way a Scrapy component reads a Trawl knob a scraper, version or job may set.

The crawl's own Scrapy settings win (the scraper's, then the version's, then the job's, merged by
runtime.settings.compose); else the project's default, which project/trawl_settings.py holds. Settings a crawl must
not change (Trawl's Redis, the throttle switch, the egress label, the guard) are not knobs: components read those
from django.conf only, so a spider's `custom_settings` cannot reach them.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings


def trawl_setting(settings: Any, name: str) -> Any:
    """`name` from a crawl's Scrapy settings (a crawler's `settings`), else the project's default for it."""
    value = settings.get(name)
    return getattr(django_settings, name) if value is None else value
