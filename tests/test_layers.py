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


def modules(package: str = PACKAGE) -> list:
    return sorted(name[:-3] for name in os.listdir(package) if name.endswith(".py"))


def harness_imports(module: str, package: str = PACKAGE) -> list:
    """(imported harness module, line, at module level?) for every import of a harness module in `module`."""
    with open(os.path.join(package, module + ".py")) as f:
        tree = ast.parse(f.read())
    top_level = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module == "harness":
            names = [a.name if os.path.exists(os.path.join(package, a.name + ".py")) else "__init__"
                     for a in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("harness."):
            names = [node.module.split(".")[1]]
        elif isinstance(node, ast.Import):
            names = [a.name.split(".")[1] if "." in a.name else "__init__"
                     for a in node.names if a.name.split(".")[0] == "harness"]
        found += [(name, node.lineno, id(node) in top_level) for name in names]
    return found


def layer_violations(package: str = PACKAGE, rank: dict = RANK) -> list:
    """Every import that hides inside a function or block, or reaches a layer above its module."""
    problems = []
    for module in modules(package):
        for imported, line, at_top in harness_imports(module, package):
            where = f"harness/{module}.py:{line} imports harness.{imported}"
            if not at_top:
                problems.append(f"{where} inside a function or block: move the shared piece down a layer instead")
            elif rank[imported] > rank[module]:
                problems.append(f"{where}, a layer above it")
    return problems


def import_cycle(package: str = PACKAGE):
    """One import cycle among the package's modules as 'a -> b -> a', or None."""
    graph = {m: {i for i, _, _ in harness_imports(m, package) if i != "__init__"} for m in modules(package)}
    done, path = set(), []

    def visit(m):
        if m in path:
            return " -> ".join(path[path.index(m):] + [m])
        if m in done:
            return None
        path.append(m)
        for n in sorted(graph[m]):
            found = visit(n)
            if found:
                return found
        path.pop()
        done.add(m)
        return None
    return next((c for c in map(visit, sorted(graph)) if c), None)


def test_every_module_has_a_layer():
    assert sorted(RANK) == modules(), "add the new module to LAYERS here and to harness/__init__.py's picture"


def test_imports_go_down_and_sit_at_the_top():
    assert layer_violations() == []


def test_no_import_cycle():
    assert import_cycle() is None


def test_the_checks_fail_on_a_package_that_breaks_them(tmp_path):
    """A made-up package: `low` (ground) imports `high` (commands) at the top, `high` imports `low` inside
    a function. Each rule must name its offence."""
    (tmp_path / "low.py").write_text("from harness import high\n")
    (tmp_path / "high.py").write_text("def f():\n    from harness import low\n    return low\n")
    rank = {"low": 0, "high": 2}
    problems = layer_violations(str(tmp_path), rank)
    assert any("low.py:1 imports harness.high, a layer above it" in p for p in problems), problems
    assert any("high.py:2 imports harness.low inside a function" in p for p in problems), problems
    assert import_cycle(str(tmp_path)) in ("high -> low -> high", "low -> high -> low")


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
