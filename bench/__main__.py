"""`python -m bench NAME [args]` runs one benchmark (bench/bench_NAME.py, or a tool such as
notes_corpus); `python -m bench` alone lists them with the first line of each one's docstring.
`python -m bench.bench_NAME` runs the same script."""

from __future__ import annotations

import ast
import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Modules of bench/ that are not run: what the scripts share.
SHARED = {"__init__", "__main__", "harness", "baselines", "report"}
PREFIX = "bench_"


def scripts() -> dict[str, str]:
    """Each runnable name -> its module under bench/ (bench_cisi is `cisi`, notes_corpus is `notes_corpus`)."""
    out = {}
    for path in sorted(HERE.glob("*.py")):
        if path.stem not in SHARED:
            out[path.stem.removeprefix(PREFIX)] = path.stem
    return out


def summary(module: str) -> str:
    """The first line of a script's docstring, read without importing it (some need optional peers)."""
    doc = ast.get_docstring(ast.parse((HERE / f"{module}.py").read_text())) or ""
    return doc.splitlines()[0] if doc else ""


def listing() -> str:
    names = scripts()
    width = max(map(len, names))
    lines = ["usage: python -m bench NAME [args]   (NAME --help: its options)", ""]
    lines += [f"  {name:<{width}}  {summary(module)}" for name, module in names.items()]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(listing())
        return 0
    names = scripts()
    name = argv[0].replace("-", "_")
    module = names.get(name) or names.get(name.removeprefix(PREFIX))
    if module is None:
        print(f"no benchmark named {argv[0]!r}\n\n{listing()}", file=sys.stderr)
        return 2
    sys.argv = [str(HERE / f"{module}.py"), *argv[1:]]
    runpy.run_module(f"bench.{module}", run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
