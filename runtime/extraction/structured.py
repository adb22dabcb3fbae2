"""A page's structured data — JSON-LD, microdata, OpenGraph (extruct) — looked up by the name of a field.

`StructuredData(root, base_url).value("price")` answers `("89.90", "json-ld")`: the first syntax, in the order of
SYNTAXES, whose data has the field, under the names FIELD_PATHS (schema.org, for JSON-LD and microdata) and
OPENGRAPH_PROPERTIES give it; a field not listed there is looked up as the schema.org property of its own name.
Each syntax is parsed on first use, from the page's already parsed tree (no second parse).

extruct's microdata walks, for every item, every property below it and each property's ancestors up to its item, and
reads each property's whole text: a 16 KB page of 300 nested items takes it 13 s, 1,000 nested properties 8 s. So a
page's microdata is read only when its shape is measured affordable first (`microdata_affordable`, XPath in C, a few
ms): at most MICRODATA_MAX_ITEMS items, no property deeper than MICRODATA_MAX_DEPTH elements, at most
MICRODATA_MAX_WORK properties counted under every item, at most MICRODATA_MAX_TEXT characters of property text. A
page over them is left to its JSON-LD and OpenGraph (`failed` names `microdata`). Measured on the bounds' worst
shapes: under a second.

Which entity answers: a page holds several (a breadcrumb, the shop's Organization, the Product). Main entities
(MAIN_TYPES: a Product, an Article, ...) are asked first, then others, then the page itself (WebPage); site furniture
(IGNORED_TYPES) never. Values come out as text, as a selector's do: a number as written, an object by its `url` or
`name`, a list by its first element.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

logger = logging.getLogger(__name__)

SYNTAXES = ("json-ld", "microdata", "opengraph")
FIELD_PATHS: dict[str, tuple[str, ...]] = {
    "title": ("name", "headline"),
    "name": ("name", "headline"),
    "price": ("offers.price", "offers.lowPrice", "offers.priceSpecification.price"),
    "currency": ("offers.priceCurrency", "offers.priceSpecification.priceCurrency"),
    "availability": ("offers.availability",),
    "brand": ("brand.name", "brand"),
    "author": ("author.name", "author"),
    "image": ("image",),
    "description": ("description",),
    "sku": ("sku",),
    "gtin": ("gtin", "gtin13", "gtin12", "gtin14", "gtin8"),
    "mpn": ("mpn",),
    "published": ("datePublished",),
    "modified": ("dateModified",),
    "rating": ("aggregateRating.ratingValue",),
    "reviews": ("aggregateRating.reviewCount",),
}
OPENGRAPH_PROPERTIES: dict[str, tuple[str, ...]] = {
    "title": ("og:title",),
    "name": ("og:title",),
    "description": ("og:description",),
    "image": ("og:image", "og:image:url"),
    "price": ("product:price:amount", "og:price:amount"),
    "currency": ("product:price:currency", "og:price:currency"),
    "availability": ("product:availability", "og:availability"),
    "brand": ("product:brand", "og:brand"),
    "author": ("article:author",),
    "published": ("article:published_time",),
    "modified": ("article:modified_time",),
}
MAIN_TYPES = frozenset(
    {
        "product",
        "productgroup",
        "article",
        "newsarticle",
        "blogposting",
        "techarticle",
        "scholarlyarticle",
        "report",
        "recipe",
        "jobposting",
        "event",
        "book",
        "course",
        "softwareapplication",
        "movie",
        "vehicle",
    }
)
PAGE_TYPES = frozenset({"webpage", "itempage", "collectionpage"})
IGNORED_TYPES = frozenset(
    {
        "breadcrumblist",
        "listitem",
        "itemlist",
        "website",
        "searchaction",
        "organization",
        "sitenavigationelement",
        "wpheader",
        "wpfooter",
        "wpsidebar",
        "imageobject",
    }
)
MICRODATA_MAX_ITEMS = 1000
MICRODATA_MAX_DEPTH = 48
MICRODATA_MAX_WORK = 5000
MICRODATA_MAX_TEXT = 1_000_000
VALUE_KEYS = ("url", "contentUrl", "@id", "name", "@value")  # what stands for an object given where text is wanted


class StructuredData:
    """One page's structured data, parsed syntax by syntax as a lookup first needs it."""

    def __init__(self, root: Any, *, base_url: str) -> None:
        self.root = root
        self.base_url = base_url
        self.parsed: dict[str, Any] = {}
        self.failed: list[str] = []  # syntaxes whose data could not be read (a broken script, a hostile nesting)

    def value(self, field: str) -> tuple[str, str] | None:
        """(text, syntax) for `field`, or None when no syntax has it."""
        for syntax in SYNTAXES:
            text = self._opengraph(field) if syntax == "opengraph" else self._schema(syntax, field)
            if text:
                return text, syntax
        return None

    def _schema(self, syntax: str, field: str) -> str | None:
        paths = FIELD_PATHS.get(field, (field,))
        for entity in self._read(syntax):
            for path in paths:
                text = as_text(lookup(entity, path))
                if text:
                    return text
        return None

    def _opengraph(self, field: str) -> str | None:
        properties = self._read("opengraph")
        for name in OPENGRAPH_PROPERTIES.get(field, (f"og:{field}",)):
            if properties.get(name, "").strip():
                return properties[name].strip()
        return None

    def _read(self, syntax: str) -> Any:
        if syntax not in self.parsed:
            self.parsed[syntax] = self._parse(syntax)
        return self.parsed[syntax]

    def _parse(self, syntax: str) -> Any:
        # extruct (with rdflib, html5lib, mf2py: ~7 MiB) is imported by the first page read, not by every crawl
        # process: most crawls never read structured data.
        from extruct.jsonld import JsonLdExtractor
        from extruct.opengraph import OpenGraphExtractor
        from extruct.w3cmicrodata import MicrodataExtractor

        try:
            if syntax == "json-ld":
                return ranked(flattened(JsonLdExtractor().extract_items(self.root)))
            if syntax == "microdata":
                if not microdata_affordable(self.root):
                    raise ValueError("too many or too deeply nested items and properties (MICRODATA_MAX_*)")
                return ranked(MicrodataExtractor().extract_items(self.root, self.base_url))
            return opengraph_properties(OpenGraphExtractor().extract_items(self.root))
        except Exception as exc:  # the page's data is the page's problem: the item keeps what selectors found
            logger.warning("%s: %s not read (%s: %s)", self.base_url, syntax, type(exc).__name__, exc)
            self.failed.append(syntax)
            return {} if syntax == "opengraph" else []


def microdata_affordable(root: Any) -> bool:
    """Whether extruct's microdata walk stays small on this tree (the bounds above)."""
    items = root.xpath("//*[@itemscope]")
    if len(items) > MICRODATA_MAX_ITEMS or root.xpath(f"boolean(//*[@itemprop][ancestor::*[{MICRODATA_MAX_DEPTH}]])"):
        return False
    work = 0
    for item in items:
        work += int(item.xpath("count(.//*[@itemprop])"))
        if work > MICRODATA_MAX_WORK:
            return False
    text = 0
    for prop in root.xpath("//*[@itemprop][not(@itemscope)][not(@content)]"):
        text += int(prop.xpath("string-length(.)"))
        if text > MICRODATA_MAX_TEXT:
            return False
    return True


def flattened(items: list[Any]) -> Iterator[dict[str, Any]]:
    """JSON-LD's top-level objects, a `@graph`'s members among them."""
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("@graph"), list):
            yield from (member for member in item["@graph"] if isinstance(member, dict))
        elif isinstance(item, dict):
            yield item


def ranked(entities: Iterator[dict[str, Any]] | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Main entities first, then others, then the page; site furniture left out."""
    ranks = {}
    for entity in entities:
        types = entity_types(entity)
        if types and types <= IGNORED_TYPES:
            continue
        ranks[id(entity)] = (0 if types & MAIN_TYPES else 2 if types & PAGE_TYPES else 1, entity)
    return [entity for _, entity in sorted(ranks.values(), key=lambda pair: pair[0])]


def entity_types(entity: dict[str, Any]) -> set[str]:
    """Lower-case schema.org type names of a JSON-LD (`@type`) or microdata (`type`) entity."""
    declared = entity.get("@type", entity.get("type"))
    names = declared if isinstance(declared, list) else [declared]
    return {name.rstrip("/").rsplit("/", 1)[-1].rsplit("#", 1)[-1].lower() for name in names if isinstance(name, str)}


def lookup(entity: Any, path: str) -> Any:
    """The value at a dotted path; a list on the way stands for its first element, microdata's `properties` are
    looked into."""
    value = entity
    for name in path.split("."):
        value = first(value)
        if isinstance(value, dict) and isinstance(value.get("properties"), dict) and "type" in value:
            value = value["properties"]
        if not isinstance(value, dict):
            return None
        value = value.get(name)
    return value


def as_text(value: Any) -> str | None:
    value = first(value)
    if isinstance(value, dict):
        value = value.get("properties", value)
        value = next((value[key] for key in VALUE_KEYS if isinstance(value.get(key), str | int | float)), None)
    if isinstance(value, bool) or value is None or isinstance(value, dict | list):
        return None
    return str(value).strip() or None


def first(value: Any) -> Any:
    return next((element for element in value if element not in (None, "")), None) if isinstance(value, list) else value


def opengraph_properties(found: Iterator[dict[str, Any]]) -> dict[str, str]:
    """Each OpenGraph property's first non-empty value."""
    properties: dict[str, str] = {}
    for head in found:
        for name, content in head.get("properties", ()):
            if isinstance(content, str) and content.strip() and name not in properties:
                properties[name] = content
    return properties
