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
    ("scrapyd",),
    ("demo", "bench"),
)
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
                    if target in RUNG and target != app:
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


# What the runtime may not import of an app: it is handed a plain description of the crawl (runtime.spec).
APP_INTERNALS = ("models", "services", "selectors", "tasks")


def _every_import(tree):
    """Every module an import names, `from a import b` also as `a.b`, under TYPE_CHECKING and in functions too."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield node.lineno, [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif _import_module_call(node):
            yield node.lineno, [node.args[0].value]


def _import_module_call(node):
    """`importlib.import_module("...")` with a literal name."""
    return (
        isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )


def _forbidden_in_runtime(module):
    parts = module.split(".")
    if parts[0] not in RUNG or parts[0] == "runtime":
        return False
    return parts[0] == "crawls" or (len(parts) > 1 and parts[1] in APP_INTERNALS)


def runtime_ties(root=ROOT / "runtime"):
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for lineno, modules in _every_import(tree):
            forbidden = [module for module in modules if _forbidden_in_runtime(module)]
            if forbidden:  # the module the import names first (`from a.models import X`: a.models, not a.models.X)
                found.append(f"{path.relative_to(root.parent)}:{lineno} {forbidden[0]}")
    return found


def test_the_runtime_imports_no_app_internals_and_nothing_of_crawls():
    """The apps hand the runtime plain values and receive outcomes through named functions: no model, service,
    selector or task of any app, and nothing of crawls, reaches it, however lazily or only for type checking."""
    ties = runtime_ties()
    assert not ties, "the runtime reaches into the apps:\n" + "\n".join(ties)


def test_the_runtime_check_sees_every_form(tmp_path):
    (tmp_path / "m.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from registry.models import Package\n"
        "def f():\n    from throttling import services\n    import crawls.logs.joblog\n"
        "from throttling.proxies import ProxyEntry\nfrom runtime.spec import CrawlSpec\n"
        "importlib.import_module('items.tasks')\n"
    )
    found = [where.split(" ", 1)[1] for where in runtime_ties(tmp_path)]
    assert sorted(found) == ["crawls.logs.joblog", "items.tasks", "registry.models", "throttling.services"]


def test_the_reader_sees_lazy_and_dynamic_imports():
    tree = ast.parse("def f():\n    from crawls import x\n    importlib.import_module('ops.tasks')\n")
    assert [modules for _, modules in _imported_names(tree)] == [["crawls"], ["ops.tasks"]]


def test_the_reader_sees_imports_under_type_checking():
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from crawls.models import CrawlJob\n")
    assert [modules for _, modules in _imported_names(tree)] == [["typing"], ["crawls.models"]]
