"""APIs and serializers read through selectors: no ORM query is written in them.

Reads every API and serializer module of the apps with `ast` (a module that imports `rest_framework`, or one named
apis.py, *_apis.py, api_urls.py or serializers.py) and fails on a query built there: a `.objects` manager, a queryset
method that shapes a query (`.filter(...)`, `.order_by(...)` ...), or `get_object_or_404` handed a model class
instead of a selector's queryset. The reads themselves live in each app's selectors, named for what they return.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_layers import ROOT, RUNG

QUERY_METHODS = {
    *("filter", "exclude", "annotate", "aggregate", "select_related", "prefetch_related"),
    *("order_by", "values", "values_list", "exists", "in_bulk", "get_or_create", "update_or_create"),
}
API_NAMES = {"apis.py", "api_urls.py", "serializers.py"}


def _is_api_module(path: Path, tree: ast.Module) -> bool:
    if path.name in API_NAMES or path.name.endswith("_apis.py"):
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(alias.name.split(".")[0] == "rest_framework" for alias in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "rest_framework":
            return True
    return False


def orm_queries(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, what) for each query built in the module."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "objects":
            found.append((node.lineno, ".objects"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in QUERY_METHODS:
            found.append((node.lineno, f".{node.func.attr}()"))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "get_object_or_404"
            and node.args
            and isinstance(node.args[0], ast.Name)
        ):
            found.append((node.lineno, f"get_object_or_404({node.args[0].id}, ...)"))
    return sorted(found)


def api_modules():
    for app in RUNG:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            tree = ast.parse(path.read_text(), filename=str(path))
            if _is_api_module(path, tree):
                yield path, tree


def test_apis_and_serializers_build_no_query():
    queries = [
        f"{path.relative_to(ROOT)}:{line} {what}" for path, tree in api_modules() for line, what in orm_queries(tree)
    ]
    assert not queries, "ORM queries outside selectors (move each read into the app's selectors):\n" + "\n".join(
        queries
    )


def test_the_api_modules_are_found():
    names = {str(path.relative_to(ROOT)) for path, _ in api_modules()}
    assert {"crawls/apis.py", "crawls/runs.py", "items/serializers.py", "ops/apis.py", "throttling/apis.py"} <= names


def test_the_reader_sees_managers_query_methods_and_model_lookups():
    tree = ast.parse(
        "Item.objects.all()\n"
        "items_visible(requester=r).filter(pk=1)\n"
        "get_object_or_404(Scraper, name=n)\n"
        "get_object_or_404(scrapers_by_name(), name=n)\n"
        "params.get('kind')\n"
    )
    assert orm_queries(tree) == [(1, ".objects"), (2, ".filter()"), (3, "get_object_or_404(Scraper, ...)")]
