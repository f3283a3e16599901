"""Write the generated reference sections of the docs from the code itself: one script, one check.

    python -m scripts.gen_reference           # rewrite the sections
    python -m scripts.gen_reference --check   # exit 1 if a committed section differs (tests/test_docs.py)

- docs/protocol.md: one entry per command, from its declaration in hebbs/protocol.py (the request
  Struct's fields, types and defaults, its docstring, its reply type and how the doors treat it).
- docs/cli.md: every subcommand's usage and options, from the CLI's own parser (hebbs.cli.main).
- docs/config.md: every key of `config.toml`, from the Structs of hebbs/config.py: its section, type,
  default and the comment written above it.
- docs/python-api.md: the public names of `hebbs` (the Engine's methods with their signatures and
  docstrings, the clients, the data types with their fields, the errors).

Each section sits between `<!-- generated:NAME -->` and `<!-- end generated:NAME -->`; the prose and
the real exchanges around them are written by hand.
"""

from __future__ import annotations

import argparse
import enum
import inspect
import os
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


def _wire_default(field: msgspec.structs.FieldInfo) -> str:
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
        fields = "<br>".join(f"`{f.name}`: {_type_name(f.type)} = {_wire_default(f)}".replace("|", "\\|")
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


def _field_comments(cls: type) -> dict[str, str]:
    """The comment lines written right above each field in the class body, joined; the fields that
    follow it with no blank line or comment between share it ("see" the first)."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    comments: dict[str, str] = {}
    pending: list[str] = []
    lead = None  # the commented field a run of fields follows
    for line in source.splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("#").strip())
            lead = None
            continue
        match = re.match(r"(\w+)\s*:", stripped) if line.startswith("    ") and not line.startswith("     ") else None
        if match and pending:
            comments[match.group(1)] = " ".join(pending)
            lead = match.group(1)
        elif match and lead:
            comments[match.group(1)] = f"See `{lead}`."
        else:
            lead = None
        pending = []
    return comments


def _own_doc(obj: object) -> str:
    """The object's own docstring (not one inherited from msgspec.Struct or Exception), on one line."""
    doc = obj.__dict__.get("__doc__") if isinstance(obj, type) else obj.__doc__
    return " ".join(inspect.cleandoc(doc).split()) if doc else ""


def _annotation(cls: type, name: str) -> str:
    for klass in cls.__mro__:
        raw = klass.__dict__.get("__annotations__", {}).get(name)
        if raw is not None:
            return raw if isinstance(raw, str) else getattr(raw, "__name__", str(raw))
    return "?"


def _value(value: object) -> str:
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "unset"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_value(v)}" for k, v in value.items()) + "}" if value else "{}"
    return repr(value)


def _default(field: msgspec.structs.FieldInfo) -> object:
    if field.required:
        return msgspec.NODEFAULT
    return field.default if field.default is not msgspec.NODEFAULT else field.default_factory()


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


# docs/config.md -------------------------------------------------------------------------------


def config_section() -> str:
    from hebbs import config

    out: list[str] = []

    def table(cls: type, prefix: str) -> None:
        comments = _field_comments(cls)
        rows, nested = [], []
        for field in msgspec.structs.fields(cls):
            default = _default(field)
            if isinstance(default, msgspec.Struct):
                nested.append((field.name, type(default)))
                continue
            rows.append(f"| `{field.name}` | {_cell(_annotation(cls, field.name))} | {_cell(_value(default))} | "
                        f"{_cell(comments.get(field.name, ''))} |")
        if rows:
            out.append(f"### `[{prefix}]`" if prefix else "### Top level")
            out.append("")
            doc = _own_doc(cls)
            if doc:
                out.extend([doc, ""])
            out.extend(["| key | type | default | what it does |", "|---|---|---|---|", *rows, ""])
        for name, sub in nested:
            table(sub, f"{prefix}.{name}" if prefix else name)

    table(config.VaultConfig, "")
    return "\n".join(out).rstrip()


# docs/python-api.md ---------------------------------------------------------------------------


def _annotation_text(annotation: object) -> str:
    text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
    return text.strip("'\"")


def _default_text(value: object) -> str:
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if value is Ellipsis:
        return "..."  # a sentinel: the argument is left unchanged when not given
    return repr(value)


def _signature(fn: typing.Callable, name: str) -> str:
    sig = inspect.signature(fn)
    params = []
    star_done = False
    for p in sig.parameters.values():
        if p.name in ("self", "cls"):
            continue
        if p.kind is p.KEYWORD_ONLY and not star_done:
            params.append("*")
            star_done = True
        if p.kind is p.VAR_POSITIONAL:
            star_done = True
        text = ("*" if p.kind is p.VAR_POSITIONAL else "**" if p.kind is p.VAR_KEYWORD else "") + p.name
        if p.annotation is not p.empty:
            text += f": {_annotation_text(p.annotation)}"
        if p.default is not p.empty:
            text += f" = {_default_text(p.default)}"
        params.append(text)
    ret = sig.return_annotation
    ret = "" if ret is sig.empty else f" -> {_annotation_text(ret)}"
    return f"{name}({', '.join(params)}){ret}"


def _methods(cls: type) -> list[tuple[str, typing.Callable]]:
    out = []
    members: dict[str, typing.Any] = {}
    for klass in reversed(cls.__mro__[:-1]):  # inherited too: the clients' typed methods live in a shared base
        members.update(klass.__dict__)
    for name, member in members.items():
        if name.startswith("_"):
            continue
        fn = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
        if callable(fn):
            out.append((name, fn))
    return sorted(out)


def api_engine_section() -> str:
    import hebbs

    out = []
    for name, fn in _methods(hebbs.Engine):
        out.append(f"#### `{_signature(fn, name)}`")
        out.append("")
        doc = inspect.getdoc(fn)
        if doc:
            out.extend([doc, ""])
    return "\n".join(out).rstrip()


def api_clients_section() -> str:
    import hebbs

    engine = {n for n, _ in _methods(hebbs.Engine)}
    client = {n for n, _ in _methods(hebbs.Client)}
    out = [f"- Both clients have the Engine's methods: {', '.join(f'`{n}`' for n in sorted(engine & client))}.",
           f"- In process only (Engine): {', '.join(f'`{n}`' for n in sorted(engine - client))}.",
           f"- The daemon's own (Client and AsyncClient): {', '.join(f'`{n}`' for n in sorted(client - engine))}."]
    return "\n".join(out)


def api_types_section() -> str:
    import hebbs

    out = []
    for name in hebbs.__all__:
        obj = getattr(hebbs, name)
        if isinstance(obj, type) and issubclass(obj, msgspec.Struct):
            out.append(f"#### `{name}`")
            out.append("")
            doc = _own_doc(obj)
            if doc:
                out.extend([doc, ""])
            comments = _field_comments(obj)
            out.extend(["| field | type | default | |", "|---|---|---|---|"])
            for field in msgspec.structs.fields(obj):
                default = _default(field)
                shown = "required" if default is msgspec.NODEFAULT else _value(default)
                out.append(f"| `{field.name}` | {_cell(_annotation(obj, field.name))} | {_cell(shown)} | "
                           f"{_cell(comments.get(field.name, ''))} |")
            out.append("")
        elif isinstance(obj, type) and issubclass(obj, enum.Enum):
            out.extend([f"#### `{name}`", ""])
            doc = _own_doc(obj)
            if doc and not doc.startswith("str(object="):
                out.extend([doc, ""])
            out.extend([", ".join(f"`{m.name}`" for m in obj), ""])
    return "\n".join(out).rstrip()


def api_errors_section() -> str:
    import hebbs

    out = []
    for name in hebbs.__all__:
        obj = getattr(hebbs, name)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            base = obj.__bases__[0].__name__
            out.append(f"- `{name}` ({base}): {_own_doc(obj)}")
    return "\n".join(out)


SECTIONS = {
    "docs/protocol.md": [("commands", protocol_section)],
    "docs/cli.md": [("options", cli_section)],
    "docs/config.md": [("config", config_section)],
    "docs/python-api.md": [("engine", api_engine_section), ("clients", api_clients_section),
                           ("types", api_types_section), ("errors", api_errors_section)],
}


def render(text: str, name: str, body: str) -> str:
    start, end = f"<!-- generated:{name} -->", f"<!-- end generated:{name} -->"
    block = f"{start}\n<!-- written by scripts/gen_reference.py: edit the code, then run it -->\n\n{body}\n\n{end}"
    if start in text:
        return re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    return text.rstrip() + "\n\n" + block + "\n"


def stale(write: bool) -> list[str]:
    """The docs whose generated sections differ from the code (rewritten when `write`)."""
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps help at the terminal's width
    try:
        out = []
        for path, parts in SECTIONS.items():
            file = ROOT / path
            text = file.read_text()
            new = text
            for name, make in parts:
                new = render(new, name, make())
            if new != text:
                out.append(path)
                if write:
                    file.write_text(new)
        return out
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="say which doc differs; change nothing")
    args = parser.parse_args(argv)
    differ = stale(write=not args.check)
    if args.check and differ:
        print(f"out of date: {', '.join(differ)}; run python -m scripts.gen_reference", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
