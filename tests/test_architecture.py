"""The layers are a contract (pyproject.toml [tool.importlinter], docs/architecture.md): no module imports
a layer above its own, recall strategies never import each other, and no package has an import cycle."""

from __future__ import annotations

import sys
from pathlib import Path

import processes

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    run = processes.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
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


SPAWNERS = {"Popen", "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput"}


def test_every_child_a_test_starts_gets_default_signals() -> None:
    """A child started under `nohup` or `trap "" INT` inherits SIGINT ignored: a test that then sends it
    Ctrl-C waits for nothing and leaves it running. Every subprocess call in tests/ goes through
    tests/processes.py (or passes preexec_fn itself), and the processes it starts are stopped by conftest."""
    import ast

    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.name == "processes.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SPAWNERS
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "subprocess"
                    and not any(k.arg == "preexec_fn" for k in node.keywords)):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in {
                    "system", "popen", "spawnv", "spawnl"} and getattr(node.func.value, "id", "") == "os":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, "use processes.popen/run (tests/processes.py): " + ", ".join(offenders)
