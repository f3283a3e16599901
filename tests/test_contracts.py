"""The storage contracts (hebbs/store/contract.py) are held by mypy: both record stores and both vector
searches conform (pyproject.toml [tool.mypy], hebbs/core/_conformance.py), and a backend that leaves out
one member of a contract fails the check."""

from __future__ import annotations

import ast
import os
import re
import sys
from pathlib import Path

import processes

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = ROOT / "hebbs" / "store" / "contract.py"


def mypy(*args: str, cache: Path) -> tuple[int, str]:
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    run = processes.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                         "--cache-dir", str(cache), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                        timeout=600)
    return run.returncode, run.stdout + run.stderr


def test_both_backends_conform_and_the_checked_modules_type_check(tmp_path: Path) -> None:
    code, output = mypy(cache=tmp_path / "cache")
    assert code == 0, output
    assert "Success: no issues found" in output


def backend_from(protocol: str, name: str, without: str | None) -> str:
    """A plain class with every member of the Protocol `protocol` (bodies `...`), less `without`."""
    tree = ast.parse(CONTRACT.read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == protocol)

    def member(node: ast.stmt) -> str | None:
        if isinstance(node, ast.FunctionDef):
            return node.name
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            return node.target.id
        return None

    kept = [node for node in cls.body if member(node) is not None and member(node) != without]
    assert without is None or len(kept) == sum(1 for n in cls.body if member(n) is not None) - 1
    return ast.unparse(ast.ClassDef(name=name, bases=[], keywords=[], body=kept, decorator_list=[], type_params=[]))


def test_a_backend_missing_a_member_of_its_contract_fails_mypy(tmp_path: Path) -> None:
    fake = tmp_path / "fake_backends.py"
    fake.write_text("\n\n".join([
        '# mypy: disable-error-code="empty-body"\nfrom __future__ import annotations\n'
        "from hebbs.store.contract import *  # noqa: F403",
        backend_from("RecordStore", "CompleteStore", None),
        backend_from("RecordStore", "StoreWithoutChangeLog", "touched_since"),
        backend_from("VectorSearch", "CompleteSearch", None),
        backend_from("VectorSearch", "SearchWithoutCapability", "remote"),
        "def complete_store(s: CompleteStore) -> RecordStore:\n    return s",
        "def store_without_change_log(s: StoreWithoutChangeLog) -> RecordStore:\n    return s",
        "def complete_search(s: CompleteSearch) -> VectorSearch:\n    return s",
        "def search_without_capability(s: SearchWithoutCapability) -> VectorSearch:\n    return s",
    ]) + "\n", encoding="utf-8")
    code, output = mypy(str(fake), cache=tmp_path / "cache")
    assert code == 1, output
    lines = fake.read_text(encoding="utf-8").splitlines()
    failing = {lines[int(n) - 2].split("(")[0] for n in re.findall(rf"{re.escape(fake.name)}:(\d+): error", output)}
    assert failing == {"def store_without_change_log", "def search_without_capability"}, output
    assert '"StoreWithoutChangeLog" is missing following "RecordStore" protocol member' in output
    assert "touched_since" in output and "remote" in output
