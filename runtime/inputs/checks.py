"""What a requester hands a spider, checked as the built-in spiders will run it: regexes on RE2
(runtime/inputs/patterns.py), selectors without extension functions (runtime/inputs/xpaths.py).

The job, batch and source checks and the API's serializers call these; the spiders compile with the same functions
when they start. A PatternError names the first bad field, dotted from the options: `allow_regex.0`, `config.allow.1`,
`config.fields.title`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.inputs.patterns import PatternError, patterns_compile
from runtime.inputs.xpaths import selectors_config_check

CONFIG_PATTERN_KEYS = ("allow", "deny", "follow")  # the sitemap spider's URL filters
OPTION_PATTERN_KEYS = ("allow_regex", "deny_regex")  # the link spider's


def dotted(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def config_check(config: Any, *, prefix: str = "config") -> None:
    """Every regex and selector of a spider config. A discovery source's `children.config` is checked the same way:
    it becomes its children's config."""
    if config is None:
        return
    if not isinstance(config, Mapping):
        raise PatternError("the spider config is an object", field=prefix or "config")
    for key in CONFIG_PATTERN_KEYS:
        patterns_compile(config.get(key), field=dotted(prefix, key))
    selectors_config_check(config, prefix=prefix)
    children = config.get("children")
    if isinstance(children, Mapping) and children.get("config") is not None:
        config_check(children["config"], prefix=dotted(prefix, "children.config"))


def options_check(options: Any) -> None:
    """A job's `options`: the link spider's regexes and the spider config."""
    if not options:
        return
    if not isinstance(options, Mapping):
        raise PatternError("options is an object", field="options")
    for key in OPTION_PATTERN_KEYS:
        patterns_compile(options.get(key), field=key)
    config_check(options.get("config"))
