"""The query core's place among the packages: the CLI and the read API both import it, it imports neither,
and neither imports the other (but for the CLI commands that start the service or make its keys)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "lineage"


def imports(folder: str) -> list[tuple[str, str, str]]:
    """(file, enclosing top-level function or '', imported module) of every import under lineage/<folder>."""
    found = []
    for path in sorted((PACKAGE / folder).rglob("*.py")):
        tree = ast.parse(path.read_text())
        for top in tree.body:
            where = top.name if isinstance(top, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) else ""
            for node in ast.walk(top):
                if isinstance(node, ast.ImportFrom) and node.module:
                    found.append((path.name, where, node.module))
                elif isinstance(node, ast.Import):
                    found.extend((path.name, where, alias.name) for alias in node.names)
    return found


def test_the_query_core_knows_no_front_end() -> None:
    found = imports("query")
    assert found, "no imports read: wrong folder"
    front = [i for i in found if i[2].split(".")[0] in {"click", "starlette", "uvicorn", "aiohttp", "http"}]
    front += [i for i in found if i[2].startswith(("lineage.cli", "lineage.serve", "lineage.graph"))]
    assert front == []


def test_the_read_api_does_not_import_the_cli() -> None:
    assert [i for i in imports("serve") if i[2].startswith("lineage.cli")] == []
    assert any(i[2].startswith("lineage.query") for i in imports("serve"))


def test_the_cli_imports_the_service_only_to_start_it() -> None:
    serve = [(f, where) for f, where, module in imports("cli") if module.startswith("lineage.serve")]
    assert serve and {where for _, where in serve} <= {"serve_command", "hash_key_command"}
    assert any(i[2].startswith("lineage.query") for i in imports("cli"))
