"""The harness package in layers (harness/__init__.py draws them): parsed, never imported, so a cycle
that only works because an import hides inside a function still fails here."""
import ast
import os

import pytest

from harness import worker
from tests.harness_run import REPO

PACKAGE = os.path.join(REPO, "harness")
LAYERS = {
    "ground": ("__init__", "problem", "codec", "compare", "noise", "judge", "integrity", "timing", "profiling",
               "kernelbench", "gpumode", "protocols", "processes"),
    "worker side": ("worker", "client", "trial"),
    "commands": ("check", "bench", "sweep", "profile", "protocol", "export"),
    "presentation": ("report", "cli", "__main__"),
}
RANK = {module: rank for rank, modules in enumerate(LAYERS.values()) for module in modules}


def modules() -> list:
    return sorted(name[:-3] for name in os.listdir(PACKAGE) if name.endswith(".py"))


def harness_imports(module: str) -> list:
    """(imported harness module, line, at module level?) for every import of a harness module in `module`."""
    with open(os.path.join(PACKAGE, module + ".py")) as f:
        tree = ast.parse(f.read())
    top_level = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module == "harness":
            names = [a.name if os.path.exists(os.path.join(PACKAGE, a.name + ".py")) else "__init__"
                     for a in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("harness."):
            names = [node.module.split(".")[1]]
        elif isinstance(node, ast.Import):
            names = [a.name.split(".")[1] if "." in a.name else "__init__"
                     for a in node.names if a.name.split(".")[0] == "harness"]
        found += [(name, node.lineno, id(node) in top_level) for name in names]
    return found


def test_every_module_has_a_layer():
    assert sorted(RANK) == modules(), "add the new module to LAYERS here and to harness/__init__.py's picture"


@pytest.mark.parametrize("module", modules())
def test_imports_go_down_and_sit_at_the_top(module):
    for imported, line, at_top in harness_imports(module):
        where = f"harness/{module}.py:{line} imports harness.{imported}"
        assert at_top, f"{where} inside a function or block: move the shared piece down a layer instead"
        assert RANK[imported] <= RANK[module], f"{where}, a layer above it"


def test_no_import_cycle():
    graph = {m: {i for i, _, _ in harness_imports(m) if i != "__init__"} for m in modules()}
    done, path = set(), []

    def visit(m):
        if m in path:
            raise AssertionError("import cycle: " + " -> ".join(path[path.index(m):] + [m]))
        if m not in done:
            path.append(m)
            for n in sorted(graph[m]):
                visit(n)
            path.pop()
            done.add(m)
    for m in graph:
        visit(m)


def closure(module: str) -> set:
    """The harness modules `module` imports, directly or through others."""
    seen, todo = set(), [module]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += [i for i, _, _ in harness_imports(m)]
    return seen


def test_the_worker_imports_only_ground_modules():
    above = sorted(m for m in closure("worker") - {"worker"} if RANK[m] > RANK["__init__"])
    assert above == [], f"the solution's process would load {above}"


def test_the_tamper_snapshot_watches_everything_the_worker_runs():
    """The worker snapshots every harness module loaded in its process (worker.harness_modules()); here,
    every module in the worker's import closure must be among them and have its functions watched."""
    loaded = {m.__name__ for m in worker.harness_modules()}
    wanted = {"harness" if m == "__init__" else f"harness.{m}" for m in closure("worker")}
    assert wanted <= loaded
    snapshot = worker.integrity.tamper_snapshot(worker.harness_modules())
    for name in sorted(wanted - {"harness"}):
        assert any(key.startswith(name + ".") for key in snapshot), f"{name}: no function of it is watched"
