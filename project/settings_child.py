"""Settings of a packaged version's crawl child process (runtime.packaged.child), never of any other process.

The child runs uploaded code: it must not be able to read the worker's secrets from its settings. So this module does
not import project.settings: no database (Django's dummy backend: any query raises ImproperlyConfigured; what Trawl's
components ask the database goes to the parent, runtime.packaged.child_db), a SECRET_KEY made up here (nothing in the
child signs anything), and the non-secret values its parent sent in TRAWL_CHILD_SETTINGS
(runtime.packaged.child_env), among them a Redis URL of the child's own.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from django.core.management.utils import get_random_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent
DEBUG = False
SECRET_KEY = get_random_secret_key()
ALLOWED_HOSTS: list[str] = []
DATABASES: dict = {}
CACHES = {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}

_KEPT_HERE = {"BASE_DIR", "DEBUG", "SECRET_KEY", "DATABASES", "CACHES"}
globals().update(
    {
        name: value
        for name, value in json.loads(os.environ.get("TRAWL_CHILD_SETTINGS") or "{}").items()
        if name.isupper() and name not in _KEPT_HERE
    }
)
