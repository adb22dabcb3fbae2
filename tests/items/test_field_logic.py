"""Field-level history's pure rules: diffs one level into dicts, walking changes back, volatility and watch rules."""

from __future__ import annotations

from collections import Counter

import pytest

from items.history.fields import change_revert, fields_diff
from items.history.rules import rule_matches, rules_check
from items.history.volatility import fields_volatile, runs_tally


def walk_back(data: dict, old: dict) -> dict:
    """What `data` was before the changes from `old` to it, undone newest first as the job's view does."""
    back = dict(data)
    for change in reversed(fields_diff(old, data)):
        change_revert(back, path=change.path, kind=change.kind, old=change.old)
    return back


def test_a_diff_names_each_moved_field_and_follows_dicts_one_level():
    old = {"title": "A", "price": "10", "sections": {"Intro": "hi", "Pricing": "5 €"}, "_provenance": {"a": 1}}
    new = {"title": "A", "price": "9", "sections": {"Intro": "hi", "Pricing": "6 €", "FAQ": "?"}, "stock": 3}

    moved = {(c.field, c.kind, c.old, c.new) for c in fields_diff(old, new)}

    assert moved == {
        ("price", "changed", "10", "9"),
        ("sections.Pricing", "changed", "5 €", "6 €"),
        ("sections.FAQ", "added", None, "?"),
        ("stock", "added", None, 3),
    }  # no `title`, no `sections.Intro`, nothing of `_provenance`


@pytest.mark.parametrize(
    "old, new",
    [
        ({"a": 1, "b": {"x": 1}}, {"a": 2, "b": {"x": 1, "y": 2}}),
        ({"a": 1}, {"b": {"x": 1}}),  # a dict that came with its keys goes with them
        ({"a": {}}, {"a": {"x": 1}}),
        ({"a": {"x": 1}}, {"a": 5}),
        ({"a": 5}, {"a": {"x": 1, "y": [1, 2]}}),
        ({"a": None, "b": [1]}, {"b": [1, 2]}),
    ],
)
def test_walking_the_changes_back_gives_the_old_data(old, new):
    assert walk_back(new, old) == old


def test_a_field_moving_on_most_runs_is_volatile_and_a_few_price_moves_are_not():
    runs: list = []
    runs = runs_tally(runs, job_id="1", seen=0, changed=Counter())  # a first crawl: nothing known yet
    assert runs == []
    runs = runs_tally(runs, job_id="2", seen=100, changed=Counter({"banner": 100, "price": 3}))
    assert fields_volatile(runs) == []  # one run is not "most runs"
    runs = runs_tally(runs, job_id="3", seen=40, changed=Counter({"banner": 40, "price": 1}))
    assert fields_volatile(runs) == ["banner"]
    runs = runs_tally(runs, job_id="3", seen=60, changed=Counter({"price": 2}))  # the same run's next chunk
    assert runs[-1] == {"job": "3", "seen": 100, "changed": {"banner": 40, "price": 3}}
    assert fields_volatile(runs) == []  # 40 of 100: this run did not move it after all
    for job in "456":
        runs = runs_tally(runs, job_id=job, seen=10, changed=Counter())
    assert len(runs) == 3 and fields_volatile(runs) == []


def test_rules_on_fields():
    drop = {"field": "price", "drop_pct": 5}
    cheaper = [{"field": "price", "kind": "changed", "old": "100.00 €", "new": "90.00 €"}]
    slightly = [{"field": "price", "kind": "changed", "old": "100", "new": "97"}]
    assert rule_matches(drop, cheaper) and not rule_matches(drop, slightly)
    assert not rule_matches({"field": "price", "rise_pct": 1}, cheaper)
    assert rule_matches({"field": "price"}, slightly) and not rule_matches({"field": "title"}, slightly)
    came = [{"field": "stock", "kind": "added", "old": None, "new": 3}]
    assert rule_matches({"field": "stock", "appears": True}, came)
    assert not rule_matches({"field": "stock", "disappears": True}, came)
    assert rule_matches({"field": "sections"}, [{"field": "sections.FAQ", "kind": "added", "old": None, "new": "?"}])


BAD_RULES = [
    [],
    {},
    [{"price": 1}],
    [{"field": "p", "drop_pct": "5"}],
    [{"field": "p", "drop_pct": 500}],
    [{"field": "p", "x": 1}],
    [{"field": "p", "appears": True, "disappears": True}],
    [{"field": "p", "appears": 1}],
    [{"field": "p"}] * 21,
]


@pytest.mark.parametrize("rules", BAD_RULES)
def test_bad_rules_are_refused(rules):
    with pytest.raises(ValueError):
        rules_check(rules)
