"""The "Done when" figures of issue 29 (each command declared once), measured on the source tree.

    python scripts/command_metrics.py [--json] [--root PATH]

- For each protocol command, how many files under hebbs/ name it, among the layers that serve a
  command (hebbs.protocol and above: the client, the daemon and its panel, the proxy, MCP, the CLI;
  the engine and what it calls implement a command once and are not counted, as the issue's own
  count of `reinforce`, "7+", leaves them out). A file names a command when its
  syntax tree holds (a) the command's request Struct as an identifier, (b) the command's wire name
  as a whole string constant, (c) a function or method defined under the command's name or its
  Engine method's name, or (d) an attribute of that name read off an engine or a client
  (`engine.reinforce`, `hb.reinforce`, `client.reinforce`, `self._client.reinforce`...).
  Reading the syntax tree, not the text, keeps `d.get(...)` or the word "source" in a comment from
  counting; for the same reason a string used as a key (`view["edges"]`, `{"status": 403}`,
  `form["reinforce"]`) does not count for (b): it names a field of some data (a reply's `edges`, an
  HTTP status, recall's `reinforce` option), which changing the command would not touch.
  Goal: median at most 2, maximum at most 4.
- Hand-kept lists of command names: module-level sets, tuples, lists or dicts whose literal items are
  three or more command names (a generated table is built from the declarations, not spelled out).
- Lines of hebbs/daemon/handlers.py (goal <= 300) and hebbs/client.py (goal <= 700).
- Functions over 80 lines in hebbs/cli/ and hebbs/mcp_server.py (goal: none).
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECEIVERS = {"engine", "eng", "client", "hb", "ahb", "_client", "_engine", "aclient", "c"}


def commands(root: Path) -> dict[str, tuple[str, str]]:
    """{wire name: (Struct name, Engine method)} read from hebbs/protocol.py's syntax tree (no import:
    the script measures any checkout, even one that does not run)."""
    found: dict[str, tuple[str, str]] = {}
    for path in [root / "hebbs" / "protocol.py", *sorted((root / "hebbs" / "protocol").glob("*.py"))]:
        if not path.exists():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            tag = next((k.value.value for k in node.keywords if k.arg == "tag"
                        and isinstance(k.value, ast.Constant)), None)
            if isinstance(tag, str):
                engine = _engine_method(node) or tag
                found[tag] = (node.name, engine)
    return found


def _engine_method(node: ast.ClassDef) -> str | None:
    """The engine="..." of a command's declaration, when it has one."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.keyword) and sub.arg == "engine" and isinstance(sub.value, ast.Constant):
            return sub.value.value
    return None


def _receiver(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def names_in(tree: ast.AST) -> tuple[set[str], set[str], set[str], set[str]]:
    identifiers, strings, defs, calls = set(), set(), set(), set()
    keys = {id(k) for node in ast.walk(tree) for k in (
        node.keys if isinstance(node, ast.Dict) else [node.slice] if isinstance(node, ast.Subscript) else [])}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            identifiers.add(node.id)
        elif isinstance(node, ast.alias):
            identifiers.add(node.asname or node.name.rsplit(".", 1)[-1])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in keys:
            strings.add(node.value)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs.add(node.name)
        elif isinstance(node, ast.Attribute) and _receiver(node.value) in RECEIVERS:
            calls.add(node.attr)
    return identifiers, strings, defs, calls


# The layers above hebbs.engine (pyproject's contract): where a command is served rather than done.
INTERFACE = ("hebbs/protocol", "hebbs/client.py", "hebbs/daemon/", "hebbs/proxy/", "hebbs/mcp_server.py",
             "hebbs/cli/", "hebbs/commands")


def naming_files(root: Path) -> dict[str, list[str]]:
    table = commands(root)
    trees = {p.relative_to(root).as_posix(): names_in(ast.parse(p.read_text()))
             for p in sorted((root / "hebbs").rglob("*.py"))
             if p.relative_to(root).as_posix().startswith(INTERFACE)}
    out: dict[str, list[str]] = {}
    for tag, (struct, method) in sorted(table.items()):
        out[tag] = [path for path, (ids, strings, defs, calls) in trees.items()
                    if struct in ids or tag in strings or {tag, method} & defs or {tag, method} & calls]
    return out


def hand_lists(root: Path) -> list[str]:
    tags = set(commands(root))
    found = []
    for path in sorted((root / "hebbs").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if not isinstance(node, (ast.Assign, ast.AnnAssign)):
                continue
            literals = [n.value for n in ast.walk(node.value) if isinstance(n, ast.Constant)
                        and isinstance(n.value, str)] if node.value is not None else []
            named = [s for s in literals if s in tags]
            if len(named) >= 3:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                name = ", ".join(ast.unparse(t) for t in targets)
                found.append(f"{path.relative_to(root).as_posix()}:{node.lineno} {name} ({len(named)} names)")
    return found


def long_functions(root: Path, limit: int = 80) -> list[str]:
    paths = [*sorted((root / "hebbs" / "cli").glob("*.py")), root / "hebbs" / "mcp_server.py"]
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    found.append(f"{path.relative_to(root).as_posix()}:{node.lineno} {node.name} ({length} lines)")
    return found


def measure(root: Path) -> dict:
    naming = naming_files(root)
    counts = {tag: len(files) for tag, files in naming.items()}
    lines = {name: len((root / name).read_text().splitlines())
             for name in ("hebbs/daemon/handlers.py", "hebbs/client.py")}
    return {"commands": len(counts), "files_per_command_median": statistics.median(counts.values()),
            "files_per_command_max": max(counts.values()), "files_per_command": counts, "naming": naming,
            "hand_kept_lists": hand_lists(root), "lines": lines, "functions_over_80_lines": long_functions(root)}


GOALS = (("files per command, median", lambda m: m["files_per_command_median"], 2),
         ("files per command, max", lambda m: m["files_per_command_max"], 4),
         ("hand-kept lists of command names", lambda m: len(m["hand_kept_lists"]), 0),
         ("daemon/handlers.py lines", lambda m: m["lines"]["hebbs/daemon/handlers.py"], 300),
         ("client.py lines", lambda m: m["lines"]["hebbs/client.py"], 700),
         ("functions over 80 lines in cli/ and mcp_server.py", lambda m: len(m["functions_over_80_lines"]), 0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--root", type=Path, default=ROOT)
    args = parser.parse_args(argv)
    m = measure(args.root)
    if args.json:
        print(json.dumps(m, indent=1))
        return 0
    for what, get, goal in GOALS:
        value = get(m)
        print(f"{what:52} {value:>6g}  (goal <= {goal}){'' if value <= goal else '  MISSED'}")
    worst = sorted(m["files_per_command"].items(), key=lambda kv: -kv[1])[:8]
    print("most named:", ", ".join(f"{tag} {n}" for tag, n in worst))
    for line in m["hand_kept_lists"] + m["functions_over_80_lines"]:
        print("  ", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
