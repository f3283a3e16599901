"""Write the generated reference sections of docs/protocol.md and docs/cli.md from the code itself.

    python scripts/gen_reference.py           # rewrite the sections
    python scripts/gen_reference.py --check   # exit 1 if a committed section differs (tests/test_reference_docs.py)

docs/protocol.md: one entry per command, from its declaration in hebbs/protocol.py (the request
Struct's fields, types and defaults, its docstring, its reply type and how the doors treat it).
docs/cli.md: every subcommand's usage and options, from the CLI's own parser (hebbs.cli.main).
Each section sits between `<!-- generated:NAME -->` and `<!-- end generated:NAME -->`; the prose and
the real exchanges around them are written by hand.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
import typing
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hebbs import protocol  # noqa: E402


def _type_name(type_: typing.Any) -> str:
    """A field's type as the wire sees it, short."""
    if typing.get_origin(type_) is typing.Annotated:
        base, *meta = typing.get_args(type_)
        if type_ == protocol.ShortId:
            return "id"
        return _type_name(base)
    origin = typing.get_origin(type_)
    args = typing.get_args(type_)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType")):
        names = [_type_name(a) for a in args if a is not type(None) and a is not msgspec.UnsetType]
        return " | ".join(names) + (" | null" if type(None) in args else "")
    if origin is typing.Literal:
        return " | ".join(repr(a).replace("'", '"') for a in args)
    if origin in (list, tuple, dict):
        inner = ", ".join(_type_name(a) for a in args if a is not Ellipsis)
        return f"{origin.__name__}[{inner}]"
    if isinstance(type_, type):
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
            type_.__name__, type_.__name__)
    return str(type_).replace("typing.", "")


def _default(field: msgspec.structs.FieldInfo) -> str:
    if field.required:
        return "required"
    value = field.default if field.default is not msgspec.NODEFAULT else field.default_factory()
    if value is msgspec.UNSET:
        return "absent: unchanged"
    return msgspec.json.encode(value).decode()


def _result_name(cls: type) -> str:
    result = cls.spec.result
    if result is None:
        return "depends on the request (below)"
    return _type_name(result) if typing.get_origin(result) else result.__name__


def protocol_section() -> str:
    lines = ["| command | fields (type, default) | reply data | writes | retried | vault |",
             "|---|---|---|---|---|---|"]
    for tag, cls in protocol.COMMAND_TYPES.items():
        spec = cls.spec
        fields = "<br>".join(f"`{f.name}`: {_type_name(f.type)} = {_default(f)}".replace("|", "\\|")
                             for f in msgspec.structs.fields(cls)) or "-"
        lines.append(f"| `{tag}` | {fields} | {_result_name(cls).replace('|', chr(92) + '|')} | "
                     f"{'yes' if spec.writes else 'no'} | {'yes' if spec.retryable else 'no'} | "
                     f"{'needed' if spec.vault else 'none'} |")
    lines.append("")
    for tag, cls in protocol.COMMAND_TYPES.items():
        doc = inspect.cleandoc(cls.__doc__ or "").replace("\n", " ")
        lines.append(f"- `{tag}`: {doc}")
    return "\n".join(lines)


COMMON = {"help", "format", "home", "global_", "vault"}


def cli_section() -> str:
    from hebbs.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help for a in sub._choices_actions}
    out = ["Every command also takes `--format text|json` and `--home DIR`; those that use a vault take "
           "`--global` or `--vault PATH` (see Common flags).", ""]
    for name, command in sub.choices.items():
        out.append(f"- **`hebbs {name}`**: {helps.get(name, '')}")
        for action in command._actions:
            if action.dest in COMMON:
                continue
            out.append(f"  - {_option(action)}")
    return "\n".join(out)


def _option(action: argparse.Action) -> str:
    if action.option_strings:
        words = "/".join(action.option_strings)
        if action.nargs != 0:
            metavar = action.metavar or action.dest.upper()
            words += " " + (" ".join(metavar) if isinstance(metavar, tuple) else metavar)
    else:
        words = action.metavar or action.dest
        words = f"[{words}]" if action.nargs in ("?", "*") else words + (" ..." if action.nargs == "+" else "")
    text = f"`{words}`"
    if action.choices and not isinstance(action.choices, dict):
        text += f" ({' | '.join(map(str, action.choices))})"
    text += f": {action.help or ''}"
    default = action.default
    if action.required:
        text += " (required)"
    elif default not in (None, False, [], argparse.SUPPRESS) and "default" not in (action.help or ""):
        text += f" (default: {'here' if default == '.' else default})"
    return text


SECTIONS = {"docs/protocol.md": ("commands", protocol_section), "docs/cli.md": ("options", cli_section)}


def render(text: str, name: str, body: str) -> str:
    start, end = f"<!-- generated:{name} -->", f"<!-- end generated:{name} -->"
    block = f"{start}\n<!-- written by scripts/gen_reference.py: edit the code, then run it -->\n\n{body}\n\n{end}"
    if start in text:
        return re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    return text.rstrip() + "\n\n" + block + "\n"


def main(argv: list[str] | None = None) -> int:
    import os

    os.environ["COLUMNS"] = "100"  # argparse wraps help at the terminal's width
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="say which doc differs; change nothing")
    args = parser.parse_args(argv)
    stale = []
    for path, (name, make) in SECTIONS.items():
        file = ROOT / path
        text = file.read_text()
        new = render(text, name, make())
        if new != text:
            stale.append(path)
            if not args.check:
                file.write_text(new)
    if args.check and stale:
        print(f"out of date: {', '.join(stale)}; run python scripts/gen_reference.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
