"""Prices: price-parser finds the amount and the currency text; a small table turns symbols into ISO 4217 codes."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from price_parser import Price

# price-parser returns the currency as written on the page: a symbol, a local abbreviation or already a code.
CURRENCY_SYMBOLS = {
    "$": "USD",
    "us$": "USD",
    "€": "EUR",
    "eur": "EUR",
    "£": "GBP",
    "₽": "RUB",
    "руб": "RUB",
    "руб.": "RUB",
    "р.": "RUB",
    "¥": "JPY",
    "₹": "INR",
    "₴": "UAH",
    "грн": "UAH",
    "zł": "PLN",
    "kč": "CZK",
    "₩": "KRW",
    "₺": "TRY",
    "c$": "CAD",
    "ca$": "CAD",
    "a$": "AUD",
    "au$": "AUD",
    "chf": "CHF",
    "fr.": "CHF",
    "kr": "SEK",
    "r$": "BRL",
}


@dataclass(frozen=True)
class ParsedPrice:
    amount: Decimal
    currency: str  # ISO 4217 code, or "" when the text names none and no default applies


def currency_code(text: str | None) -> str:
    """ISO code of a currency as written: "$" → "USD", "руб." → "RUB", "usd" → "USD"; "" when unknown."""
    if not text:
        return ""
    cleaned = text.strip().lower()
    if cleaned in CURRENCY_SYMBOLS:
        return CURRENCY_SYMBOLS[cleaned]
    if len(cleaned) == 3 and cleaned.isalpha() and cleaned.isascii():
        return cleaned.upper()
    return ""


def price_parse(value: Any, *, default_currency: str = "") -> ParsedPrice | None:
    """Amount and currency of "$1,299.00", "1 299,00 ₽", "1.299 €", 12.5 ...; None when there is no amount."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float | Decimal):
        try:
            return ParsedPrice(Decimal(str(value)), default_currency)
        except InvalidOperation:
            return None
    parsed = Price.fromstring(str(value))
    if parsed.amount is None:
        return None
    return ParsedPrice(parsed.amount, currency_code(parsed.currency) or default_currency)


def price_convert(price: ParsedPrice, *, base: str, rates: dict[str, Any]) -> Decimal | None:
    """The amount in `base`, with `rates` = units of base per one unit of each currency; None without a rate."""
    if not price.currency:
        return None
    if price.currency == base:
        return price.amount
    rate = rates.get(price.currency)
    if rate is None:
        return None
    return (price.amount * Decimal(str(rate))).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
