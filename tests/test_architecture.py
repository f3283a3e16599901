"""The layers are a contract (pyproject.toml [tool.importlinter], docs/architecture.md): no module imports
a layer above its own, recall strategies never import each other, and no package has an import cycle."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    run = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


def test_engine_is_a_thin_facade() -> None:
    """Engine's methods hand over to the layers below: logic added to engine.py instead of a workflow
    or recall module fails here (docs/architecture.md, "The open vault")."""
    import ast
    tree = ast.parse((ROOT / "hebbs" / "engine.py").read_text(encoding="utf-8"))
    engine = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Engine")
    too_long = {}
    for method in (n for n in engine.body if isinstance(n, ast.FunctionDef)):
        body = method.body[1:] if ast.get_docstring(method) else method.body
        statements = sum(1 for stmt in body for node in ast.walk(stmt) if isinstance(node, ast.stmt))
        if statements > 10:
            too_long[method.name] = statements
    assert not too_long, f"Engine methods doing work themselves (statements): {too_long}"
    imported = {alias.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for alias in n.names}
    assert "WriteSet" not in imported, "Engine builds write batches itself; that belongs in hebbs/workflows/"
