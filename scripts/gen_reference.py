"""Write the generated reference sections of the docs from the code itself: one script, one check.

    python -m scripts.gen_reference           # rewrite the sections
    python -m scripts.gen_reference --check   # exit 1 if a committed section differs (tests/test_docs.py)

- docs/protocol.md: one entry per command, from its declaration in hebbs/protocol.py (the request
  Struct's fields, types and defaults, its docstring, its reply type and how the doors treat it).
- docs/cli.md: every subcommand's usage and options, from the CLI's own parser (hebbs.cli.main).
- docs/config.md: every key of `config.toml`, from the Structs of hebbs/config.py: its section, type,
  default and the comment written above it.
- docs/honesty.md and skills/SKILL.md: the default abstain threshold, from hebbs/config.py.
- docs/python-api.md: the public names of `hebbs` (the Engine's methods with their signatures and
  docstrings, the clients, the data types with their fields, the errors).
- hebbs/client_methods.py, whole: each declared command's typed method of Client and, as a
  coroutine, of AsyncClient, written out from its declaration so that type checkers see them.
- hebbs/cli/declared_options.py, whole: each declared CLI subcommand's options, so that building
  the command line loads no declaration.
- hebbs/cli/declared_actions.py, whole: the actions of a written subcommand that are declared
  commands (`hebbs contradictions list|commit|auto`).

Each section sits between `<!-- generated:NAME -->` and `<!-- end generated:NAME -->`; the prose and
the real exchanges around them are written by hand.
"""

from __future__ import annotations

import argparse
import enum
import inspect
import json
import os
import pprint
import re
import sys
import textwrap
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
    if origin in (typing.Union, __import__("types").UnionType):
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
    name = _type_name(result) if typing.get_origin(result) else result.__name__
    return f"{name}; list[{name}] for a batch (`{cls.spec.batch}`)" if cls.spec.batch else name


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
            if action.dest in COMMON or action.help == argparse.SUPPRESS:
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


# hebbs/client_methods.py: the typed methods of Client and AsyncClient ---------------------------

METHODS_HEADER = '''"""Generated by `python -m scripts.gen_reference` from the declarations in hebbs/protocol.py: do not
edit (tests/test_docs.py checks that it is what they say).

Each declared command's typed method, written out so that type checkers and editors see it: once for
Client (`Methods`) and once, as a coroutine, for AsyncClient (`AsyncMethods`), from one declaration.
A method's parameters are its request's fields with the Struct's defaults (renamed or keyword-only as
the declaration's `params` says), its docstring the command's; `call` (hebbs/client.py) sends
them as the wire carries them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from msgspec import UNSET, UnsetType  # noqa: F401

from . import protocol

if TYPE_CHECKING:
    import datetime
    import os
    from collections.abc import Sequence
    from typing import Literal

{type_imports}
    from .transport import ProgressCallback


class Methods:
    """The declared commands' methods of Client."""

    def call(self, command: Any, progress: ProgressCallback | None = None, *, vault: bool | None = None,
             method: str | None = None, **fields: Any) -> Any:
        raise NotImplementedError
'''


def _py_type(type_: typing.Any, names: set[str], given: bool = True) -> str:
    """A request field's type as a typed method takes it (what `_wire` in hebbs/client.py accepts)."""
    if type_ == protocol.Micros:
        return "int | str | datetime.datetime"
    if type_ == protocol.PathText:
        return "str | os.PathLike[str]"
    if type_ == protocol.EdgeTypeName:
        names.add("EdgeType")
        return "EdgeType | str"
    origin, args = typing.get_origin(type_), typing.get_args(type_)
    if origin is typing.Annotated:
        if given and any(isinstance(m, msgspec.Meta) and (m.extra or {}).get("micros") for m in type_.__metadata__):
            return "int | str | datetime.datetime | None"  # AsOf: a time, as a Micros field takes it
        return _py_type(args[0], names, given)
    if type_ is protocol.ScoringWeights and given:
        names.add("ScoringWeights")
        return "ScoringWeights | dict[str, float] | Sequence[float]"
    if origin in (typing.Union, __import__("types").UnionType):
        return " | ".join(dict.fromkeys(_py_type(a, names, given) for a in args))
    if origin is typing.Literal:
        return f"Literal[{', '.join(repr(a) for a in args)}]"
    if origin is list and given:  # an argument: any sequence; one id alone too
        item = _py_type(args[0], names)
        return f"Sequence[{item}]" + (" | str" if item in ("str", "EdgeType | str") else "")
    if origin in (list, tuple, dict):
        return f"{origin.__name__}[{', '.join('...' if a is Ellipsis else _py_type(a, names, given) for a in args)}]"
    if type_ is type(None):
        return "None"
    if type_ is typing.Any:
        return "Any"
    if type_ is msgspec.UnsetType:
        return "UnsetType"
    if isinstance(type_, type) and type_.__module__ != "builtins":
        names.add(type_.__name__)
    return type_.__name__


def _typed_parameters(command: type, method: typing.Any = None) -> list[tuple[str, str, int, typing.Any]]:
    """(parameter, field, kind, default) of a declared command's typed method (or of one of its further
    methods, `also`), as `params` orders them."""
    by_name = {f.name: f for f in msgspec.structs.fields(command)}
    out = []
    for name, field, keyword_only in (method or command.spec).parameters(list(by_name)):
        info = by_name[field]
        default = (info.default if info.default is not msgspec.NODEFAULT else info.default_factory()
                   if info.default_factory is not msgspec.NODEFAULT else inspect.Parameter.empty)
        if method is not None and field in method.required:
            default = inspect.Parameter.empty
        kind = inspect.Parameter.KEYWORD_ONLY if keyword_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
        if command.spec.brains and field == "vaults":  # the client finds the vaults of the brains asked for
            name = field = "brains"
        out.append((name, field, kind, default))
    return out


# What a typed method declared with `brains` says of them, after the command's own description.
BRAINS_TEXT = {"one": "this client's vault alone", "both": "this client's vault and the global one; the global one "
               "alone for a global client"}


def _source_default(value: typing.Any) -> str:
    if value is msgspec.UNSET:
        return "UNSET"
    if value == []:  # an empty list field: an immutable default, as any sequence is taken
        return "()"
    return repr(value)


def _docstring(doc: str | None) -> list[str]:
    lines = inspect.cleandoc(doc or "").splitlines()
    lines[0] = '"""' + lines[0]
    lines[-1] += '"""'
    return ["        " + line if line else "" for line in lines]


def _def(name: str, params: list[str], returns: str, doc: str | None, body: str, asynchronous: bool) -> list[str]:
    head = f"    {'async ' if asynchronous else ''}def {name}("
    text = head + ", ".join(["self", *params]) + f") -> {returns}:"
    if len(text) > 120:  # one parameter a line past the line length
        text = head + "\n" + "".join(f"        {p},\n" for p in ["self", *params]) + f"    ) -> {returns}:"
    return [*text.split("\n"), *_docstring(doc), *_wrapped(f"        {body}"), ""]


def _wrapped(line: str, width: int = 120) -> list[str]:
    """A call past the line length, its arguments wrapped under its opening parenthesis."""
    if len(line) <= width or "(" not in line:
        return [line]
    at = next(i for i, c in enumerate(line) if c == "(" and line[i + 1] != ")")
    head, rest = line[:at], line[at + 1:]
    rest, close, tail = rest.rpartition(")")
    indent = " " * (len(head) + 1)
    out, current = [], head + "("
    for word in rest.split(", "):
        if len(current) + len(word) + 2 > width and current.strip() != head.strip() + "(":
            out.append(current.rstrip())
            current = indent
        current += word + ", "
    out.append(current[:-2] + close + tail)
    return out


def _param_texts(parameters: list[tuple[str, str, int, typing.Any]], annotations: dict[str, str]) -> list[str]:
    out, star = [], False
    for name, _, kind, default in parameters:
        if kind is inspect.Parameter.KEYWORD_ONLY and not star:
            out.append("*")
            star = True
        text = f"{name}: {annotations[name]}"
        if default is not inspect.Parameter.empty:
            text += f" = {_source_default(default)}"
        out.append(text)
    return out


def _noted(doc: str | None, notes: str | None) -> str | None:
    """A typed method's docstring: its command's, then the method's own notes on its Python arguments."""
    return inspect.cleandoc(doc or "") + "\n\n" + textwrap.fill(notes, 104) if notes else doc


def _add_method(sync: list[str], awaited: list[str], name: str, texts: list[str], returns: str, doc: str | None,
                call: str) -> None:
    """One typed method, as Client's and, awaited, as AsyncClient's: both send through `call`."""
    sync += _def(name, texts, returns, doc, f"return self.call({call})", False)
    awaited += _def(name, texts, returns, doc, f"return await self.call({call})", True)


def client_methods_source() -> str:
    names: set[str] = set()
    sync: list[str] = []
    awaited: list[str] = []
    for command in protocol.COMMAND_TYPES.values():
        fields = {f.name: f.type for f in msgspec.structs.fields(command)}
        fields["brains"] = "Sequence[str] | str | None"
        for other in command.spec.also:  # more methods over the same command
            parameters = _typed_parameters(command, other)
            annotations = {p: _py_type(fields[f], names) for p, f, _, _ in parameters}
            for p, f, _, _ in parameters:
                if f in other.required:  # a field a batch leaves out, which this method needs
                    annotations[p] = annotations[p].removesuffix(" | None")
            call = ", ".join([f"protocol.{command.__name__}", f'method="{other.name}"',
                              *(f"{f}={p}" for p, f, _, _ in parameters)])
            returns = _py_type(other.result or command.spec.result, names, False)
            doc = _noted(other.doc or command.__doc__, other.notes)
            _add_method(sync, awaited, other.name, _param_texts(parameters, annotations), returns, doc, call)
        name = command.spec.client_method
        if not name:
            continue
        parameters = _typed_parameters(command)
        annotations = {p: fields[f] if f == "brains" else _py_type(fields[f], names) for p, f, _, _ in parameters}
        texts = _param_texts(parameters, annotations)
        call = ", ".join([f"protocol.{command.__name__}", *(f"{f}={p}" for p, f, _, _ in parameters)])
        if command.spec.progress:
            texts.append("progress: ProgressCallback | None = None" if "*" in texts else
                         "*, progress: ProgressCallback | None = None")
            call += ", progress=progress"
        if command.spec.vault is None:  # it may name this client's vault: the caller says whether it does
            texts.append("vault: bool = True" if "*" in texts else "*, vault: bool = True")
            call += ", vault=vault"
        result = command.spec.result
        returns = "Any" if command.spec.returns is not None or result is None else _py_type(result, names, False)
        doc = command.__doc__
        if command.spec.brains:
            doc = _noted(doc, f'`brains` ("project", "global"): search them together, one merged list, each result '
                              f"labelled (default: {BRAINS_TEXT[command.spec.brains]}).")
        if command.spec.vault is None:
            doc = _noted(doc, "vault=False: without this client's vault.")
        _add_method(sync, awaited, name, texts, returns, doc, call)
    by_module: dict[str, list[str]] = {}
    for type_name in sorted(names):
        module = "protocol" if hasattr(protocol, type_name) and type_name not in vars(__import__("hebbs.schema").schema) \
            else "schema"
        by_module.setdefault(module, []).append(type_name)
    imports = "\n".join(f"    from .{module} import ({', '.join(found)})" for module, found in sorted(by_module.items()))
    header = METHODS_HEADER.format(type_imports="\n".join(
        line for imp in imports.splitlines() for line in _wrapped(imp)))

    return (header + "\n" + "\n".join(sync).rstrip() + "\n\n\nclass AsyncMethods:\n"
            '    """The same methods as coroutines, for AsyncClient (before Client\'s shared base in its MRO)."""\n\n'
            + "\n".join(awaited).rstrip() + "\n")


# What each of mcp_server.ROUTES does, as docs/mcp.md says it.
ROUTE_TEXT = {"write": "the one named, else the default", "read": "both by default: one merged, labelled list",
              "holder": "the one holding the id", "each": "the one holding each id",
              "grouped": "each id's holder, one call per brain", "session": "the one the session was prepared on",
              "index": "the project's notes folder, or the folder `path` names", "status": "the daemon and every brain"}


def mcp_section() -> str:
    from hebbs.mcp_server import declared_tools

    rows = ["| tool | brain | what the agent reads |", "| --- | --- | --- |"]
    for tool in declared_tools():
        params = []
        for p in tool.parameters:
            default = p.default
            shown = p.name if default in (inspect.Parameter.empty, None) else f"{p.name}={json.dumps(default)}"
            params.append(shown)
        hints = " (read-only)" if tool.hints.read_only_hint else " (destructive)" if tool.hints.destructive_hint else ""
        rows.append(f"| `{tool.name}({', '.join(params)})`{hints} | {ROUTE_TEXT[tool.entry.route]} | "
                    f"{_cell(tool.entry.text)} |")
    return "\n".join(rows)


def abstain_threshold_section() -> str:
    from hebbs.config import DEFAULT_ABSTAIN_THRESHOLD

    return (f"The default threshold is **{DEFAULT_ABSTAIN_THRESHOLD}** (`recall.abstain_threshold`; "
            "`DEFAULT_ABSTAIN_THRESHOLD` in hebbs/config.py) for a vault of all-MiniLM-L6-v2: a recall whose best "
            "confidence is below it abstains. A vault of another model uses the threshold fitted with that model's "
            "calibration (hebbs/models/registry.toml, docs/embedding.md). A vault's config.toml can set its own; "
            "every answer says the one it was held against (`threshold`).")


SECTIONS = {
    "docs/protocol.md": [("commands", protocol_section)],
    "docs/honesty.md": [("abstain-threshold", abstain_threshold_section)],
    "skills/SKILL.md": [("abstain-threshold", abstain_threshold_section)],
    "docs/mcp.md": [("tools", mcp_section)],
    "docs/cli.md": [("options", cli_section)],
    "docs/config.md": [("config", config_section)],
    "docs/python-api.md": [("engine", api_engine_section), ("clients", api_clients_section),
                           ("types", api_types_section), ("errors", api_errors_section)],
}


def cli_options_source() -> str:
    from hebbs.cli import declared

    out = ['"""Generated by `python -m scripts.gen_reference` from the declarations in hebbs/protocol.py (and the',
           "options their shells add): do not edit (tests/test_docs.py checks that it is what they say).",
           "",
           "{CLI name: (command, help, [(add_argument's arguments, its keywords; a type by its name in",
           "cli/declared.TYPES)], raw output)}: all the command line needs of a declared command, without loading its",
           'declaration (hebbs.protocol), which only a command that runs needs."""',
           "",
           "COMMANDS = {"]
    for name, cls in sorted(declared.declared().items()):
        out.append(f"    {name!r}: ({cls.tag()!r}, {declared.summary(cls)!r}, [")
        for entry in declared.arguments(cls):
            out.extend("        " + line for line in (pprint.pformat(entry, width=108, sort_dicts=False) + ",").splitlines())
        out.append(f"    ], {getattr(declared.shell(cls), 'raw_output', False)}),")
    out.append("}")
    return "\n".join(out) + "\n"


def cli_actions_source() -> str:
    """hebbs/cli/declared_actions.py: the actions of the subcommands the CLI writes whose actions are
    declared (`cli="contradictions list"`); a module of its own, so that building that subcommand's
    parser loads no more than before (declared_options.py holds every declared command's options)."""
    actions: dict[str, list[str]] = {}
    for cls in protocol.COMMAND_TYPES.values():
        for cli in cls.spec.cli_names:
            if " " in cli:
                name, action = cli.split(" ", 1)
                actions.setdefault(name, []).append(action)
    return ('"""Generated by `python -m scripts.gen_reference` from the declarations in hebbs/protocol.py: do not edit\n'
            "(tests/test_docs.py checks that it is what they say).\n\n"
            "{subcommand: its declared actions (the first the default, if it has one)}: each sends the command\n"
            "declared with that CLI name"
            ' (`cli="contradictions list"`, cli/declared.run_named)."""\n\n'
            f"ACTIONS = {actions!r}\n")


# Generated whole: source files (a test compares them with the declarations, as it does the docs).
FILES = {"hebbs/client_methods.py": client_methods_source, "hebbs/cli/declared_options.py": cli_options_source,
         "hebbs/cli/declared_actions.py": cli_actions_source}


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
        # The generated sources first: the CLI's page is read from the parser they build.
        for path, make in FILES.items():
            file = ROOT / path
            new = make()
            if not file.exists() or new != file.read_text():
                out.append(path)
                if write:
                    file.write_text(new)
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
    if not args.check and set(differ) & set(FILES):
        # The pages read the code this process imported before its generated sources changed: once more,
        # in a fresh process.
        import subprocess

        subprocess.run([sys.executable, "-m", "scripts.gen_reference"], cwd=ROOT, check=True)
    if args.check and differ:
        print(f"out of date: {', '.join(differ)}; run python -m scripts.gen_reference", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
