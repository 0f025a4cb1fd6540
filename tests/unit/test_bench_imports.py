"""The benchmark harness's imports: a DAG inside ``benchmarks/``, and the installed package never needs it.

Every import statement counts, also those inside functions and under ``TYPE_CHECKING``: a lazy import
hides a cycle from the interpreter, not from a reader.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "benchmarks"


def _harness_modules() -> dict[str, Path]:
    return {f"benchmarks.{path.stem}": path for path in sorted(HARNESS.glob("*.py"))}


def _imported(path: Path, known: set[str]) -> set[str]:
    """The ``benchmarks`` modules a file imports (``from benchmarks import x`` counts as ``benchmarks.x``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        found.update(name for name in names if name in known)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _harness_modules()
    known = set(modules)
    return {name: _imported(path, known) - {name} for name, path in modules.items()}


def test_the_harness_import_graph_is_acyclic() -> None:
    graph = _graph()
    order = list(graphlib.TopologicalSorter(graph).static_order())  # raises CycleError on a cycle
    assert set(order) == set(graph)


def test_the_stage_modules_build_on_the_shared_context_not_on_the_runner() -> None:
    graph = _graph()
    for module in ("benchmarks.freshness", "benchmarks.rentgen", "benchmarks.queries", "benchmarks.tier"):
        assert "benchmarks.runner" not in graph[module], module
    assert {"benchmarks.freshness", "benchmarks.rentgen", "benchmarks.tier"} <= graph["benchmarks.runner"]


def test_the_installed_package_does_not_import_the_harness() -> None:
    for path in sorted((ROOT / "lineage").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not any(a.name.split(".")[0] == "benchmarks" for a in node.names), path
            elif isinstance(node, ast.ImportFrom) and node.module:
                assert node.module.split(".")[0] != "benchmarks", path
