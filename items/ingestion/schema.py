"""A scraper version's item schema (`TRAWL_ITEM_SCHEMA` in its settings) and checking + normalizing one item by it.

TRAWL_ITEM_SCHEMA = {
    "required": ["title", "price"],
    "fields": {"title": "str", "price": "decimal", "image": "url"},
    "default_currency": "USD",      # optional: for prices written without one
    "base_currency": "EUR",         # optional: also store `_price_base` converted with `rates`
    "rates": {"USD": "0.92"},       # optional: units of base per unit; else TRAWL_INGESTION_RATES
}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from items.ingestion.normalize import text_clean, url_absolute
from items.ingestion.prices import currency_code, price_convert, price_parse

FIELD_TYPES = ("str", "decimal", "price", "url", "int", "bool")  # "price" is an alias of "decimal"
URL_KEYS = ("url",)  # always made absolute when a schema applies, even if the schema does not list them
TRUE, FALSE = {"true", "yes", "1", "y", "on"}, {"false", "no", "0", "n", "off"}


@dataclass(frozen=True)
class ItemSchema:
    required: tuple[str, ...] = ()
    fields: dict[str, str] = field(default_factory=dict)
    default_currency: str = ""
    base_currency: str = ""
    rates: dict[str, Any] = field(default_factory=dict)
    error: str = ""  # the setting itself is malformed: every item is rejected with this reason

    @classmethod
    def from_setting(cls, value: Any, *, base_currency: str = "", rates: dict | None = None) -> ItemSchema | None:
        """The schema a `TRAWL_ITEM_SCHEMA` setting describes; None when the setting is absent or empty."""
        if not value:
            return None
        shape_ok = (
            isinstance(value, dict)
            and isinstance(value.get("fields") or {}, dict)
            and isinstance(value.get("required") or [], list | tuple)
        )
        if not shape_ok:
            return cls(error='TRAWL_ITEM_SCHEMA must look like {"required": [...], "fields": {"name": "type"}}')
        return cls(
            required=tuple(value.get("required") or ()),
            fields=dict(value.get("fields") or {}),
            default_currency=currency_code(value.get("default_currency")),
            base_currency=currency_code(value.get("base_currency") or base_currency),
            rates={**(rates or {}), **(value.get("rates") or {})},
        )


def currency_key(name: str) -> str:
    return "currency" if name == "price" else f"{name}_currency"


def item_clean(data: dict[str, Any], *, schema: ItemSchema, base_url: str = "") -> tuple[dict[str, Any], list[str]]:
    """The normalized item and the reasons it is invalid (an empty list when it is valid)."""
    # Links resolve against the item's own page (itself maybe relative to the page the job started on).
    if schema.error:
        return data, [schema.error]
    base = url_absolute(data.get("url") or "", base=base_url) or base_url
    clean: dict[str, Any] = {}
    reasons: list[str] = []
    for name, value in data.items():
        kind = schema.fields.get(name) or ("url" if name in URL_KEYS else "str" if isinstance(value, str) else "")
        if name.startswith("_") or not kind:
            clean[name] = value
            continue
        if kind not in FIELD_TYPES:
            reasons.append(f"{name}: the schema names an unknown type {kind!r} (known: {', '.join(FIELD_TYPES)})")
            continue
        if value is None or (isinstance(value, str) and not text_clean(value)):
            continue  # empty: treated as missing
        error = _clean_field(clean, name, kind, value, data=data, schema=schema, base=base)
        if error:
            reasons.append(f"{name}: {error}")
    for name in schema.required:
        if name not in clean and not any(reason.startswith(f"{name}:") for reason in reasons):
            reasons.append(f"{name}: required but missing")
    return clean, reasons


def _clean_field(clean: dict, name: str, kind: str, value: Any, *, data: dict, schema: ItemSchema, base: str) -> str:
    """Write the normalized `value` (and any derived keys) into `clean`; return why it is invalid, or ""."""
    if isinstance(value, dict | list) and kind != "bool":
        return f"expected {kind}, got {type(value).__name__}"
    if kind == "str":
        clean[name] = text_clean(value)
    elif kind == "url":
        absolute = url_absolute(text_clean(value), base=base)
        if absolute is None:
            return f"not an http(s) URL: {str(value)[:100]!r}"
        clean[name] = absolute
    elif kind == "int":
        try:
            clean[name] = int(text_clean(value).replace(",", "").replace(" ", ""))
        except ValueError:
            return f"not an integer: {str(value)[:100]!r}"
    elif kind == "bool":
        text = text_clean(value).lower() if not isinstance(value, bool) else str(value).lower()
        if text not in TRUE | FALSE:
            return f"not a yes/no value: {str(value)[:100]!r}"
        clean[name] = text in TRUE
    else:
        return _clean_price(clean, name, value, data=data, schema=schema)
    return ""


def _clean_price(clean: dict, name: str, value: Any, *, data: dict, schema: ItemSchema) -> str:
    # A currency the spider yielded in its own field counts when the price text names none.
    default = currency_code(data.get(currency_key(name))) or schema.default_currency
    text = text_clean(value) if isinstance(value, str) else value
    parsed = price_parse(text, default_currency=default)
    if parsed is None:
        return f"no price in {str(text)[:100]!r}"
    clean[name] = str(parsed.amount)
    if parsed.currency:
        clean[currency_key(name)] = parsed.currency
    if schema.base_currency:
        converted = price_convert(parsed, base=schema.base_currency, rates=schema.rates)
        if converted is not None:
            # "_" keys are left out of change detection: a new exchange rate does not make every item "changed".
            clean[f"_{name}_base"] = str(converted)
            clean["_base_currency"] = schema.base_currency
    return ""
