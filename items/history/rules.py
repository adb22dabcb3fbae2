"""Rules of an `item.changed` watch, over one item's field changes in one job (pure functions).

- `{"field": "price", "drop_pct": 5}`: the field's number fell by at least 5 % (`rise_pct`: rose by at least);
- `{"field": "stock", "appears": true}` / `{"field": "stock", "disappears": true}`: the field came / went;
- `{"field": "title"}`: any change of the field (came, went or moved).

A rule's field is a field name (`price`, `sections.Pricing`) or a dict field (`sections`: any of its keys).
Numbers are read as prices are (`"1 299,00 €"`, `12.5`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from items.history.fields import ADDED, CHANGED, REMOVED
from items.ingestion.prices import price_parse

RULE_KEYS = {"field", "drop_pct", "rise_pct", "appears", "disappears"}
RULES_MAX = 20
FIELD_MAX = 500


def rules_check(rules: Any) -> list[dict[str, Any]]:
    """The rules as given, or a ValueError naming what is wrong (a requester's input: checked, never trusted)."""
    if not isinstance(rules, list) or not rules or len(rules) > RULES_MAX:
        raise ValueError(f"give a list of 1 to {RULES_MAX} rules")
    for number, rule in enumerate(rules):
        if not isinstance(rule, dict) or not isinstance(rule.get("field"), str) or not rule["field"]:
            raise ValueError(f"rule {number}: an object with a `field` (text)")
        if len(rule["field"]) > FIELD_MAX or set(rule) - RULE_KEYS:
            raise ValueError(f"rule {number}: field name too long or keys other than {sorted(RULE_KEYS)}")
        conditions = [key for key in ("drop_pct", "rise_pct", "appears", "disappears") if key in rule]
        if len(conditions) > 1:
            raise ValueError(f"rule {number}: at most one of {conditions}")
        for key in ("drop_pct", "rise_pct"):
            value = rule.get(key, 0)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 100:
                raise ValueError(f"rule {number}: `{key}` is a number from 0 to 100")
        for key in ("appears", "disappears"):
            if key in rule and rule[key] is not True:
                raise ValueError(f"rule {number}: `{key}` can only be true")
    return rules


def rule_matches(rule: dict[str, Any], changes: list[dict[str, Any]]) -> bool:
    """Whether one item's changes in one job (`{field, kind, old, new}` each) meet the rule."""
    return any(_meets(rule, change) for change in changes if _same_field(rule["field"], change["field"]))


def _same_field(wanted: str, field: str) -> bool:
    return field == wanted or field.split(".", 1)[0] == wanted


def _meets(rule: dict[str, Any], change: dict[str, Any]) -> bool:
    kind = change["kind"]
    if rule.get("appears"):
        return kind == ADDED
    if rule.get("disappears"):
        return kind == REMOVED
    for key, sign in (("drop_pct", -1), ("rise_pct", 1)):
        if key in rule:
            return kind == CHANGED and _moved_pct(change["old"], change["new"], sign) >= Decimal(str(rule[key]))
    return True


def _moved_pct(old: Any, new: Any, sign: int) -> Decimal:
    """How far the number moved in the asked direction, in % of the old one (-1 when either is not a number)."""
    before, after = price_parse(old), price_parse(new)
    if before is None or after is None or before.amount <= 0:
        return Decimal(-1)
    return sign * (after.amount - before.amount) * 100 / before.amount
