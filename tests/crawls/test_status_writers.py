"""Only crawls/services/lifecycle.py writes a job's status, and only crawls/services/batch_lifecycle.py a batch's:
read from the source, so a new writer fails the build.

The scan follows each write back to its model: `CrawlJob.objects…`, a related `.jobs` manager, a local variable
assigned one of those, a parameter or attribute annotated `CrawlJob`. A write whose model it cannot tell counts as a
job's: annotate the variable, or move the write into the life-cycle module. What counts as writing a job's status:
`update(status=…)` or `update(**fields)`, creating rows (`CrawlJob(…)`, `create`, `bulk_create`, `get_or_create`,
`update_or_create`), `bulk_update(…, ["status"])`, `x.status = …`, `setattr(x, "status", …)`, `save()` of a job.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIFECYCLE = "crawls/services/lifecycle.py"
BATCH_LIFECYCLE = "crawls/services/batch_lifecycle.py"
SKIPPED_DIRS = {".venv", "tests", "bench", "migrations", "var", "node_modules", "docs"}
JOB = "CrawlJob"
BATCH = "Batch"
UNKNOWN = "?"
CREATES = {"create", "bulk_create", "get_or_create", "update_or_create"}
# Calls that keep the model of what they are called on (querysets, managers, a row fetched from them).
SAME_MODEL = {
    "all", "filter", "exclude", "select_related", "prefetch_related", "only", "defer", "order_by", "distinct",
    "select_for_update", "using", "annotate", "get", "first", "last", "latest", "earliest", "none",
}  # fmt: skip


class StatusWrites(ast.NodeVisitor):
    """Collects (line, what) for every write of a job's (or another `model`'s) status in one module."""

    def __init__(self, model: str = JOB) -> None:
        self.model = model
        self.scopes: list[dict[str, ast.expr]] = [{}]
        self.self_attrs: dict[str, str] = {}
        self.found: list[tuple[int, str]] = []

    # Where names come from.
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        outer, self.self_attrs = self.self_attrs, {}
        for method in (item for item in node.body if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)):
            self.scopes.append(_params(method))
            for sub in ast.walk(method):
                if isinstance(sub, ast.Assign):
                    for target in sub.targets:
                        if _is_self_attr(target):
                            self.self_attrs.setdefault(target.attr, self.model_of(sub.value))
            self.scopes.pop()
        self.generic_visit(node)
        self.self_attrs = outer

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scopes.append(_params(node))
        self.generic_visit(node)
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            for name in _names(target):
                self.scopes[-1][name] = node.value
            if isinstance(target, ast.Attribute) and target.attr == "status":
                self.record(node, target.value, f"{ast.unparse(target)} = …")
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if isinstance(node.target, ast.Name):
            self.scopes[-1][node.target.id] = node.annotation
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        for name in _names(node.target):  # `for job in jobs`: a row of what is iterated
            self.scopes[-1][name] = node.iter
        self.generic_visit(node)

    # What writes.
    def visit_Call(self, node: ast.Call) -> None:
        func, keywords = node.func, {keyword.arg for keyword in node.keywords}
        if isinstance(func, ast.Name) and func.id == self.model:
            self.found.append((node.lineno, f"{self.model}(…) builds a row"))
        elif isinstance(func, ast.Name) and func.id == "setattr" and _constant(node.args[1:2]) == "status":
            self.record(node, node.args[0], ast.unparse(node))
        elif isinstance(func, ast.Attribute):
            method = func.attr
            # QuerySet.update takes keywords only: `progress.update(task, status=…)` is something else's.
            if method == "update" and not node.args and ("status" in keywords or None in keywords):
                self.record(node, func.value, f".update({_kwargs(node)})")
            elif method in CREATES:
                self.record(node, func.value, f".{method}(…) creates rows", unknown_counts=False)
            elif method == "bulk_update" and "status" in _strings(node):
                self.record(node, func.value, ".bulk_update(…, ['status', …])")
            elif method == "save" and ("update_fields" not in keywords or "status" in _strings(node)):
                self.record(node, func.value, ".save() of a job", unknown_counts=False)
        self.generic_visit(node)

    def record(self, node: ast.AST, receiver: ast.expr, what: str, *, unknown_counts: bool = True) -> None:
        """A write of `status` on a receiver whose model is unknown counts; a create or save (so common on other
        things) only when the receiver is known to be a job's."""
        if self.model_of(receiver) == self.model or (unknown_counts and self.model_of(receiver) == UNKNOWN):
            self.found.append((node.lineno, what))

    def model_of(self, expr: ast.expr | None, depth: int = 0) -> str:
        """The model `expr` holds rows or a queryset of: a class name, or UNKNOWN."""
        if expr is None or depth > 20:
            return UNKNOWN
        deeper = depth + 1
        match expr:
            case ast.Name(id=name) if name in self.scopes[-1]:
                return self.model_of(self.scopes[-1][name], deeper)
            case ast.Name(id=name) if name[:1].isupper():
                return name
            case ast.Constant(value=str() as annotation):  # a quoted annotation
                try:
                    return self.model_of(ast.parse(annotation, mode="eval").body, deeper)
                except SyntaxError:
                    return UNKNOWN
            case ast.Attribute(value=ast.Name(id="self"), attr=attr) if attr in self.self_attrs:
                return self.self_attrs[attr]
            case ast.Attribute(attr="jobs"):
                return JOB  # the related manager of a batch, a source, a scraper…
            case ast.Attribute(attr="objects", value=value):
                return self.model_of(value, deeper)
            case ast.Call(func=ast.Attribute(attr=method, value=value)) if method in SAME_MODEL:
                return self.model_of(value, deeper)
            case ast.Call(func=ast.Name(id=name)) if name[:1].isupper():
                return name
            case ast.Subscript(value=ast.Name(id="QuerySet" | "list" | "Iterable"), slice=inner):
                return self.model_of(inner, deeper)
            case ast.Subscript(value=value):
                return self.model_of(value, deeper)
            case ast.BinOp(op=ast.BitOr(), left=left, right=right):  # `CrawlJob | None`
                models = {self.model_of(left, deeper), self.model_of(right, deeper)} - {"None"}
                return models.pop() if len(models) == 1 else UNKNOWN
            case ast.Constant(value=None):
                return "None"
        return UNKNOWN


def _params(node: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
    return {arg.arg: arg.annotation for arg in arguments if arg.annotation is not None}


def _is_self_attr(target: ast.expr) -> bool:
    return isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"


def _names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple):
        return [name for element in target.elts for name in _names(element)]
    return []


def _constant(args: list[ast.expr]) -> object:
    return args[0].value if args and isinstance(args[0], ast.Constant) else None


def _strings(node: ast.Call) -> set[str]:
    return {sub.value for sub in ast.walk(node) if isinstance(sub, ast.Constant) and isinstance(sub.value, str)}


def _kwargs(node: ast.Call) -> str:
    return ", ".join(f"{keyword.arg}=…" if keyword.arg else "**…" for keyword in node.keywords)


def status_writes(source: str, model: str = JOB) -> list[tuple[int, str]]:
    scanner = StatusWrites(model)
    scanner.visit(ast.parse(source))
    return scanner.found


def project_modules() -> list[Path]:
    return [
        path for path in sorted(ROOT.rglob("*.py")) if not SKIPPED_DIRS.intersection(path.relative_to(ROOT).parts[:-1])
    ]


def test_only_the_lifecycle_module_writes_a_jobs_status():
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in project_modules()
        if str(path.relative_to(ROOT)) != LIFECYCLE
        for line, what in status_writes(path.read_text())
    ]

    assert not offenders, (
        "a job's status (and the fields that move with it) is written only by crawls/services/lifecycle.py; move "
        "these writes there (or annotate a variable whose model the scan cannot tell):\n  " + "\n  ".join(offenders)
    )


def test_only_the_batch_lifecycle_module_writes_a_batchs_status():
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in project_modules()
        if str(path.relative_to(ROOT)) != BATCH_LIFECYCLE
        for line, what in status_writes(path.read_text(), BATCH)
    ]

    assert not offenders, (
        "a batch's status (and the fields that move with it) is written only by crawls/services/batch_lifecycle.py; "
        "move these writes there:\n  " + "\n  ".join(offenders)
    )


def test_the_scan_sees_the_batch_lifecycle_modules_own_writes():
    writes = status_writes((ROOT / BATCH_LIFECYCLE).read_text(), BATCH)

    assert any(".create" in what for _, what in writes)  # batch_open's row
    assert any("**…" in what for _, what in writes)  # batch_transition's compare-and-set


def test_the_scan_sees_the_lifecycle_modules_own_writes():
    writes = status_writes((ROOT / LIFECYCLE).read_text())

    assert any("CrawlJob(…)" in what for _, what in writes)  # jobs_create_many's rows
    assert any(".bulk_create" in what for _, what in writes)
    assert any("**…" in what for _, what in writes)  # transition's compare-and-set


@pytest.mark.parametrize(
    "source",
    [
        "CrawlJob.objects.filter(pk=1).update(status='queued')",
        "def f(batch):\n    batch.jobs.filter(status='queued').update(status='failed')",
        "running = CrawlJob.objects.filter(pk=1)\nrunning.update(status='queued', attempt=2)",
        "def f(job: CrawlJob):\n    job.status = 'failed'\n    job.save()",
        "def f(job: 'CrawlJob | None'):\n    setattr(job, 'status', 'dead')",
        "def f(jobs: QuerySet[CrawlJob], fields):\n    jobs.update(**fields)",
        "def f(rows: list[CrawlJob]):\n    CrawlJob.objects.bulk_update(rows, ['status'])",
        "CrawlJob.objects.create(url='http://x.test/', scraper_id=1)",
        "CrawlJob.objects.bulk_create([])",
        "def f(x):\n    x.status = 'failed'",  # a model the scan cannot tell counts
        "class T:\n    def __init__(self, job: CrawlJob):\n        self.job = job\n    def g(self):\n"
        "        self.job.status = 'failed'",
        "for job in CrawlJob.objects.all():\n    job.save(update_fields=['status'])",
    ],
)
def test_the_scan_catches_each_way_of_writing_it(source):
    assert status_writes(source), source


@pytest.mark.parametrize(
    "source",
    [
        "Batch.objects.filter(pk=1).update(status='running')",
        "row = Delivery.objects.filter(pk=1)\nrow.update(status='dead')",
        "def f(category_map: CategoryMap):\n    category_map.status = 'confirmed'",
        "CrawlJob.objects.filter(pk=1).update(heartbeat_at=None)",
        "def f(bar):\n    bar.update(task, status='running')",
        "def f(job: CrawlJob):\n    job.save(update_fields=['cancel_requested_at'])",
    ],
)
def test_the_scan_passes_other_models_and_other_fields(source):
    assert not status_writes(source), source
