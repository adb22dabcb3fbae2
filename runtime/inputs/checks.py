"""What a requester hands a spider, checked as the built-in spiders will run it: regexes on RE2
(runtime/inputs/patterns.py), selectors without extension functions (runtime/inputs/xpaths.py).

The job, batch and source checks and the API's serializers call these; the spiders compile with the same functions
when they start. A PatternError names the first bad field, dotted from the options: `allow_regex.0`, `config.allow.1`,
`config.fields.title`. Sizes are bounded here too (InputBounds: `attrs`, a sitemap's `max_urls`), with limits the
caller reads from the project's settings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runtime.inputs.patterns import PatternError, patterns_compile
from runtime.inputs.xpaths import selectors_config_check

CONFIG_PATTERN_KEYS = ("allow", "deny", "follow")  # the sitemap spider's URL filters
OPTION_PATTERN_KEYS = ("allow_regex", "deny_regex")  # the link spider's


@dataclass(frozen=True)
class InputBounds:
    """How much a requester may ask for (0: no bound): `attrs` as JSON bytes (TRAWL_ATTRS_MAX_BYTES), a sitemap
    config's `max_urls` (TRAWL_SITEMAP_MAX_URLS)."""

    attrs_bytes: int = 0
    sitemap_urls: int = 0


def attrs_check(attrs: Any, *, bounds: InputBounds, field: str = "attrs") -> None:
    """`attrs` is copied into every item of the job: an object of at most `bounds.attrs_bytes` bytes as JSON."""
    if attrs is None:
        return
    if not isinstance(attrs, Mapping):
        raise PatternError("attrs is an object", field=field)
    size = len(json.dumps(attrs, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))
    if bounds.attrs_bytes and size > bounds.attrs_bytes:
        message = f"attrs is copied into every item: at most {bounds.attrs_bytes} bytes as JSON, got {size}"
        raise PatternError(message, field=field)


def max_urls_check(value: Any, *, bounds: InputBounds, field: str) -> None:
    """A sitemap config's `max_urls`: a positive integer, at most `bounds.sitemap_urls`."""
    if value is None:
        return
    cap = bounds.sitemap_urls
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or (cap and value > cap):
        raise PatternError(f"max_urls must be an integer from 1 to {cap or 'any'}, got {value!r}", field=field)


def dotted(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def config_check(config: Any, *, bounds: InputBounds, prefix: str = "config") -> None:
    """Every regex and selector of a spider config. A discovery source's `children.config` is checked the same way:
    it becomes its children's config."""
    if config is None:
        return
    if not isinstance(config, Mapping):
        raise PatternError("the spider config is an object", field=prefix or "config")
    for key in CONFIG_PATTERN_KEYS:
        patterns_compile(config.get(key), field=dotted(prefix, key))
    selectors_config_check(config, prefix=prefix)
    max_urls_check(config.get("max_urls"), bounds=bounds, field=dotted(prefix, "max_urls"))
    children = config.get("children")
    if isinstance(children, Mapping) and children.get("config") is not None:
        config_check(children["config"], bounds=bounds, prefix=dotted(prefix, "children.config"))


def options_check(options: Any, *, bounds: InputBounds) -> None:
    """A job's `options`: the link spider's regexes and `attrs`, and the spider config."""
    if not options:
        return
    if not isinstance(options, Mapping):
        raise PatternError("options is an object", field="options")
    for key in OPTION_PATTERN_KEYS:
        patterns_compile(options.get(key), field=key)
    attrs_check(options.get("attrs"), bounds=bounds)
    config_check(options.get("config"), bounds=bounds)
