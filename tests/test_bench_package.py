"""bench/ is a package with one entry point (`python -m bench NAME`): the scripts share the collections
(bench/datasets/), the workloads (bench/workloads/), report, harness and baselines, and no script imports
another script (bench/README.md)."""

from __future__ import annotations

import ast
import importlib
import processes
import sys
from pathlib import Path

from bench.__main__ import SHARED, scripts

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"


def _bench_imports(path: Path) -> set[str]:
    """The bench.* modules a file imports, by name (`from bench import x` counts as bench.x)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("bench.")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "bench":
                found |= {f"bench.{a.name}" for a in node.names}
            elif node.module.startswith("bench."):
                found.add(node.module)
    return found


def test_no_module_of_bench_imports_a_script() -> None:
    runnable = {f"bench.{module}" for module in scripts().values()}
    offenders = []
    for path in sorted(BENCH.rglob("*.py")):
        if path.name == "__main__.py":
            continue  # runs the scripts by name, never imports one
        for module in sorted(_bench_imports(path) & runnable):
            offenders.append(f"{path.relative_to(REPO)} imports {module}")
    assert not offenders, offenders


def test_the_entry_point_lists_every_script_and_each_imports() -> None:
    names = scripts()
    on_disk = {p.stem for p in BENCH.glob("*.py")} - SHARED
    assert set(names.values()) == on_disk and "cisi" in names and "team" in names
    listed = processes.run([sys.executable, "-m", "bench"], cwd=REPO, capture_output=True, text=True, check=True)
    for name in names:
        assert f"  {name} " in listed.stdout, name
    for module in names.values():
        importlib.import_module(f"bench.{module}")


def test_a_name_runs_its_script_and_an_unknown_name_is_a_clear_error() -> None:
    ran = processes.run([sys.executable, "-m", "bench", "cisi", "--help"], cwd=REPO, capture_output=True, text=True)
    assert ran.returncode == 0 and "--data" in ran.stdout and ran.stdout.startswith("usage: bench_cisi.py")
    wrong = processes.run([sys.executable, "-m", "bench", "no-such-bench"], cwd=REPO, capture_output=True, text=True)
    assert wrong.returncode == 2 and "no benchmark named 'no-such-bench'" in wrong.stderr
    assert "Traceback" not in wrong.stderr


def test_each_collection_has_one_loader_module() -> None:
    datasets = {p.stem for p in (BENCH / "datasets").glob("*.py")} - {"__init__"}
    assert {"locomo", "cisi", "medline", "notes", "jekyll", "pairs", "passages"} <= datasets
    for path in sorted(BENCH.glob("bench_*.py")):
        tree = ast.parse(path.read_text())
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert not defined & {"load", "parse", "load_questions", "session_time"}, path.name
