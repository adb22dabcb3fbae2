"""Apps import downward only, and no two apps import each other.

Reads every app module with `ast` (module-level and function-level imports, imports under
`if TYPE_CHECKING:`, and `importlib.import_module("...")` literals), so a lazy import inside a
function or an annotation's import counts as much as one at the top: each still ties the apps
together (a lower app that needs a higher app's object takes its id and plain values instead).
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Bottom to top. Apps on one rung may import each other, as long as no cycle forms (the second test).
LAYERS = (
    ("project",),
    ("access", "catalog"),
    ("items", "registry", "throttling", "callbacks"),
    ("runtime",),
    ("crawls",),
    ("ops",),
    ("sources",),
    ("demo", "bench"),
)
# The runtime's last ties to crawls, cut by the next change (the runtime takes a plain description of the crawl).
RUNTIME_TIES = {"crawls.joblog", "crawls.states", "crawls.services.shards", "crawls.models"}
RUNG = {app: rung for rung, apps in enumerate(LAYERS) for app in apps}


def _imported_names(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield node.lineno, [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, [node.module]
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, [node.args[0].value]


def app_imports():
    """(importing app, imported app, "file:line") for every import from one app into another."""
    found = []
    for app in RUNG:
        for path in sorted((ROOT / app).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for lineno, modules in _imported_names(tree):
                for module in modules:
                    target = module.split(".")[0]
                    if target in RUNG and target != app and not (app == "runtime" and module in RUNTIME_TIES):
                        found.append((app, target, f"{path.relative_to(ROOT)}:{lineno} {module}"))
    return found


def test_no_app_imports_a_higher_app():
    upward = [where for app, target, where in app_imports() if RUNG[target] > RUNG[app]]
    assert not upward, "imports that run up the layers:\n" + "\n".join(upward)


def test_no_package_level_cycle():
    """Apps on one rung may import each other, but never in a circle."""
    edges = {}
    for app, target, _ in app_imports():
        edges.setdefault(app, set()).add(target)

    def reaches(start, goal, seen=()):
        nexts = edges.get(start, ())
        return any(nxt == goal or (nxt not in seen and reaches(nxt, goal, (*seen, nxt))) for nxt in nexts)

    cycles = sorted(app for app in edges if reaches(app, app))
    assert not cycles, f"apps on an import cycle: {cycles}"


def test_the_reader_sees_lazy_and_dynamic_imports():
    tree = ast.parse("def f():\n    from crawls import x\n    importlib.import_module('ops.tasks')\n")
    assert [modules for _, modules in _imported_names(tree)] == [["crawls"], ["ops.tasks"]]


def test_the_reader_sees_imports_under_type_checking():
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from crawls.models import CrawlJob\n")
    assert [modules for _, modules in _imported_names(tree)] == [["typing"], ["crawls.models"]]
