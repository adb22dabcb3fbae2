"""Requester selectors (the `selectors` spider's config): XPath without extension functions, bounded in size.

parsel evaluates every XPath with EXSLT's regex functions bound to `re:` (`re:test`, `re:match`, `re:replace`); lxml
runs them with Python's `re`, on the reactor thread and under the GIL, so one backtracking pattern in a selector pins
the worker. A requester's XPath may therefore use no namespace prefix at all (so no `re:`, `set:`, `str:`, `math:`,
`dyn:` or `exsl:` function), call only XPath 1.0's own functions (and parsel's `has-class`), and bind no variables.
What is left runs in libxml2; its cost is kept polynomial and small by the length cap and by what a predicate may
hold: at most MAX_PREDICATE_DEPTH nested predicates, no absolute path and no `following` / `preceding` axis inside one
(each would walk the whole document again for every node tested). Walks nested in walks are refused too: an XPath
whose work can grow faster than nodes x depth (`//*[count(.//*[count(.//*)>1])>1]`: nodes x depth², hours on a
hostile page of a few MB) is refused, by runtime/inputs/xpath_cost.py's measure.

CSS selectors (parsel's, with `::text` and `::attr()`) are translated to XPath and held to the same rules. The checks
run at submission and when the spider starts (runtime/inputs/checks.py, runtime/spiders/selectors.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from cssselect import SelectorError
from lxml import etree
from parsel.csstranslator import HTMLTranslator

from runtime.inputs.patterns import PatternError
from runtime.inputs.xpath_cost import MAX_COST_DEGREE, CostUnreadable, TooManyValues, cost_degree

XPATH_PREFIX = "xpath:"
MAX_SELECTOR_LENGTH = 300  # characters of one selector, `xpath:` included
MAX_FIELDS = 50  # fields of one item
MAX_PREDICATE_DEPTH = 2  # `//div[a[@href]]` is two
SELECTOR_KEYS = ("item", "item_links", "next_page", "category_links")
# XPath 1.0's own functions and node tests, and parsel's has-class (plain Python, no regex).
FUNCTIONS = frozenset(
    {
        *("last", "position", "count", "id", "local-name", "namespace-uri", "name"),
        *("string", "concat", "starts-with", "contains", "substring-before", "substring-after", "substring"),
        *("string-length", "normalize-space", "translate", "boolean", "not", "true", "false", "lang"),
        *("number", "sum", "floor", "ceiling", "round", "text", "node", "comment", "processing-instruction"),
        "has-class",
    }
)
WHOLE_DOCUMENT_AXES = frozenset({"following", "preceding"})
# XPath 1.0's tokens: literals, numbers, operators and punctuation, names. Nothing here can backtrack.
TOKEN = re.compile(
    r"""\s*(?:('[^']*'|"[^"]*")|(\d+(?:\.\d*)?|\.\d+)|(//|::|\.\.|!=|<=|>=|[/\[\]()@,|=<>+*$.:-])|([^\W\d][\w.-]*))"""
)
# After these a `/` starts a new (absolute) path, and `*`, `and`, `or`, `div`, `mod` are names, not operators.
OPENERS = frozenset({"[", "(", ",", "|", "=", "!=", "<", "<=", ">", ">=", "+", "-", "@", "::"})
NAMED_OPERATORS = frozenset({"and", "or", "div", "mod", "*"})


class WalkOnceTranslator(HTMLTranslator):
    """parsel's CSS translation, except where the right side of a descendant combinator tests its siblings
    (`:first-child`, `:nth-child()`, `:last-of-type`...): `div li:first-child` runs as
    `div/descendant-or-self::*/li[...]` instead of `div/descendant::li[...]`, the same elements, but the sibling count
    is made once per `li` of the merged set rather than once per (div, li) pair: nodes x siblings, not nodes x depth x
    siblings (runtime/inputs/xpath_cost.py), so such everyday CSS stays accepted. Everything else keeps
    `descendant::`, which libxml2 merges faster (it removes duplicates from a smaller set)."""

    def xpath_descendant_combinator(self, left: Any, right: Any) -> Any:
        if "-sibling::" in (right.condition or ""):
            return left.join("/descendant-or-self::*/", right)
        return super().xpath_descendant_combinator(left, right)


_translator = WalkOnceTranslator()


@lru_cache(maxsize=256)
def css_xpath(css: str) -> str:
    """The XPath a requester's CSS selector runs as (checked here, evaluated so by runtime/spiders/selectors.py)."""
    return _translator.css_to_xpath(css)


def selector_xpath(spec: str) -> str:
    """The XPath a selector spec runs as: after `xpath:`, as written; else its CSS translated."""
    return spec[len(XPATH_PREFIX) :] if spec.startswith(XPATH_PREFIX) else css_xpath(spec)


def _tokens(expression: str, *, field: str) -> list[str]:
    tokens, position = [], 0
    while position < len(expression):
        found = TOKEN.match(expression, position)
        if found is None or found.end() == position:
            if not expression[position:].strip():
                break
            raise PatternError(f"cannot read the XPath {expression!r} at {expression[position:][:20]!r}", field=field)
        tokens.append(next(group for group in found.groups() if group is not None))
        position = found.end()
    return tokens


def _is_name(token: str) -> bool:
    return token[0].isalpha() or token[0] == "_"


def _opens(previous: str | None, previous_is_operator: bool) -> bool:
    """Whether the token after `previous` starts an expression (XPath 1.0's operator disambiguation rule)."""
    return previous is None or previous in OPENERS or previous_is_operator


def _refusal(token: str, following: str | None, *, depth: int, opening: bool, is_operator: bool) -> str:
    """Why this token (at predicate `depth`, after the token before it) is refused; "" if it is not."""
    if token == ":":
        return "namespace prefixes and extension functions (such as re:test) are refused"
    if token == "$":
        return "XPath variables are refused"
    if token == "[" and depth > MAX_PREDICATE_DEPTH:
        return f"at most {MAX_PREDICATE_DEPTH} nested predicates"
    if following == "(" and _is_name(token) and not is_operator and token not in FUNCTIONS:
        return f"the function {token}() is refused (XPath 1.0's own functions only)"
    if depth and following == "::" and token in WHOLE_DOCUMENT_AXES:
        return f"the {token} axis is refused inside a predicate"
    if depth and token in ("/", "//") and opening:
        return "an absolute path is refused inside a predicate (use ./ or .//)"
    return ""


def xpath_check(expression: str, *, field: str) -> None:
    """Refuse XPath a requester may not run (see the module's docstring); PatternError names `field`."""
    tokens = _tokens(expression, field=field)
    depth, previous, previous_is_operator = 0, None, False
    for index, token in enumerate(tokens):
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        opening = _opens(previous, previous_is_operator)
        is_operator = token in NAMED_OPERATORS and not opening
        depth += {"[": 1, "]": -1}.get(token, 0)
        reason = _refusal(token, following, depth=depth, opening=opening, is_operator=is_operator)
        if reason:
            raise PatternError(reason, field=field)
        previous, previous_is_operator = token, is_operator or token in ("/", "//")
    try:
        etree.XPath(expression, regexp=False)
    except (etree.XPathSyntaxError, ValueError) as exc:  # ValueError: NUL or control characters
        raise PatternError(f"{expression!r} is not a valid XPath: {exc}", field=field) from None
    _cost_check(tokens, field=field)


def _cost_check(tokens: list[str], *, field: str) -> None:
    try:
        degree = cost_degree(tokens)
    except TooManyValues as exc:
        raise PatternError(str(exc), field=field) from None
    except CostUnreadable as exc:
        raise PatternError(f"cannot tell what this XPath costs ({exc}); write it more plainly", field=field) from None
    if degree > MAX_COST_DEGREE:
        raise PatternError(
            "this XPath nests a walk inside a walk inside a walk (a `//`, descendant, ancestor or sibling axis, or an "
            "element's text, inside a predicate that is itself walked): on a deep page its work grows as the page's "
            f"size to the power {degree}. Keep one walk per predicate level, e.g. "
            "`//a[contains(., 'x')]/ancestor::div` instead of `//div[.//a[contains(., 'x')]]`",
            field=field,
        )


def selector_check(spec: Any, *, field: str) -> str:
    """A selector spec: CSS, or XPath after `xpath:`. Returns it unchanged, or raises PatternError naming `field`."""
    if not isinstance(spec, str) or not spec.strip():
        raise PatternError("a selector is a non-empty string (CSS, or XPath after `xpath:`)", field=field)
    if len(spec) > MAX_SELECTOR_LENGTH:
        raise PatternError(f"a selector has at most {MAX_SELECTOR_LENGTH} characters, got {len(spec)}", field=field)
    if spec.startswith(XPATH_PREFIX):
        xpath_check(spec[len(XPATH_PREFIX) :], field=field)
        return spec
    try:
        translated = css_xpath(spec)
    except (SelectorError, ValueError, NotImplementedError) as exc:
        raise PatternError(f"{spec!r} is not a valid CSS selector: {exc}", field=field) from None
    xpath_check(translated, field=field)
    return spec


def selectors_config_check(config: Mapping[str, Any], *, prefix: str = "config") -> None:
    """The selectors a spider config holds: `fields` (name → selector) and the block and link selectors."""
    at = f"{prefix}." if prefix else ""
    fields = config.get("fields")
    if fields is not None:
        if not isinstance(fields, Mapping):
            raise PatternError("fields maps field names to selectors", field=f"{at}fields")
        if len(fields) > MAX_FIELDS:
            raise PatternError(f"at most {MAX_FIELDS} fields, got {len(fields)}", field=f"{at}fields")
        for name, spec in fields.items():
            selector_check(spec, field=f"{at}fields.{name}")
    for key in SELECTOR_KEYS:
        if config.get(key):
            selector_check(config[key], field=f"{at}{key}")
    if not isinstance(config.get("structured_data", True), bool):
        raise PatternError("structured_data is true or false", field=f"{at}structured_data")
