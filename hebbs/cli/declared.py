"""CLI subcommands built from a command's declaration alone (hebbs.protocol, `@declare(cli=NAME)`).

The request Struct is the whole specification: each required field becomes a positional argument,
each other field an option (`--field-name`, or the declaration's `flags=` spelling) with the field's
own default, type and description, a bool that is off by default a flag, a time (Micros) ISO 8601
text or microseconds; the Struct's docstring is the help. The body sends the request and prints its
reply: JSON with `--format json`; else the declaration's `text=` template (a line per item of a list),
or what output.py prints for the reply's type, or the reply as indented JSON (or the bare value).
A command whose command line is more than its fields names a shell (`shell="module:Class"`), a class
of optional hooks: `options(parser)` adds the options that fill no field, `fields(args, fields)` checks
and changes the request from them, `send(args, fields)` sends it another way than one request (both
vaults, say), `show(args, hb, fields, result)` prints the reply as text (with `--format json` the runner
prints the reply, or what `json(args, result)` makes of it), and `instead(args)` serves the call
otherwise (an exit code; None: as declared). The options, their defaults and help stay the fields'.

What a parser needs is written out by scripts/gen_reference.py into cli/declared_options.py (checked by
tests/test_docs.py), so that `hebbs CMD --help` and building the command line load no declaration:
hebbs.protocol is imported only when a command runs.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import typing
from typing import Any, NamedTuple

import msgspec

from . import output
from .argtypes import TYPES, Entry, time_value

if typing.TYPE_CHECKING:
    from hebbs.protocol import _Command


def declared() -> dict[str, type[_Command]]:
    """{CLI name: request Struct} of every command declared as a subcommand of its own (a name of two words,
    `contradictions list`, is an action of a subcommand the CLI writes: run_named sends it)."""
    from hebbs.protocol import COMMAND_TYPES

    return {name: cls for cls in COMMAND_TYPES.values() for name in cls.spec.cli_names if " " not in name}


def run_named(args: argparse.Namespace, name: str) -> int:
    """Send the command declared with this CLI name, as run() does: its fields from the options of their
    names (the subcommand's parser gives them those dests), its shell's hooks."""
    from hebbs.protocol import COMMAND_TYPES

    return run(args, next(tag for tag, cls in COMMAND_TYPES.items() if name in cls.spec.cli_names))


class _Recorder:
    """Stands in for a parser: keeps each add_argument call, its type by name (TYPES), as the
    generated table holds it."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []

    def add_argument(self, *args: str, **kwargs: Any) -> None:
        if "type" in kwargs:
            kwargs["type"] = next(name for name, fn in TYPES.items() if fn == kwargs["type"])
        self.entries.append((args, kwargs))


def arguments(cls: type[_Command]) -> list[Entry]:
    """The add_argument calls of a declared command's parser (what cli/declared_options.py holds)."""
    recorder = _Recorder()
    add_arguments(recorder, cls)  # type: ignore[arg-type]
    return recorder.entries


def summary(cls: type[_Command]) -> str:
    """The subcommand's help: the Struct's docstring, unless its shell serves the command otherwise than by
    sending it (status over both vaults, export to a file) and says so (`summary`). Said as the command
    line says it: the protocol's reply type ("; data is RecallResults") is left out, and a command named
    by its protocol tag (reflect_prepare) is named as its subcommand (reflect-prepare)."""
    own = getattr(shell(cls), "summary", None)
    if own:
        return own
    text = inspect.cleandoc(cls.__doc__ or "").split("\n\n")[0].replace("\n", " ")
    text = re.sub(r";? data is .*$", ".", text)
    return re.sub(r"\b[a-z]+(?:_[a-z]+)+\b", lambda m: _cli_names().get(m.group(0), m.group(0)), text)


def _cli_names() -> dict[str, str]:
    """{protocol tag: CLI name} of the commands whose two names differ."""
    from hebbs.protocol import COMMAND_TYPES

    return {tag: cls.spec.cli_names[0] for tag, cls in COMMAND_TYPES.items()
            if cls.spec.cli_names and " " not in cls.spec.cli_names[0] and cls.spec.cli_names[0] != tag}


class Shape(NamedTuple):
    """What the CLI needs to know of a field's type."""

    base: Any
    many: bool = False
    choices: tuple[Any, ...] | None = None
    short_id: bool = False
    micros: bool = False
    upper: bool = False
    metavar: str | tuple[str, ...] | None = None
    help: str | None = None
    nargs: int | str | None = None  # "+": one or more words (remember's text); 3: --analogy A B C


def flags(cls: type[_Command]) -> dict[str, str]:
    """{field: the CLI's option} where the declaration spells it otherwise than `--field-name`."""
    pairs = (word.split("=") for word in (cls.spec.flags or "").split(",") if word.strip())
    return {field.strip(): flag.strip() for field, flag in pairs}


def add_arguments(parser: argparse.ArgumentParser, cls: type[_Command]) -> None:
    spelled = flags(cls)
    for field in msgspec.structs.fields(cls):
        shape = _shape(field.type)
        kind: dict[str, Any] = {"dest": field.name, "help": shape.help}
        if shape.choices:
            kind["choices"] = shape.choices
        if shape.upper:
            kind["type"] = str.upper
        elif shape.micros:
            kind.update(type=time_value, metavar="TIME")
        elif shape.base is float:
            kind["type"] = output.number
        elif shape.base is dict:
            kind["metavar"] = "JSON"  # read in run(): a bad object is the command's error, not a usage one
        elif shape.base is int:
            kind["type"] = int
        if shape.metavar:
            kind["metavar"] = shape.metavar
        if shape.nargs:
            kind["nargs"] = shape.nargs
        if shape.short_id:
            kind["help"] = kind["help"] or "a memory id, or its last 6+ characters"
            if field.name in ("id", "ids"):
                kind["metavar"] = "ID"
        flag = spelled.get(field.name, "--" + field.name.replace("_", "-"))
        if not flag:
            continue  # not on the command line
        if field.required or not flag.startswith("-"):
            kind.pop("dest")
            kind.setdefault("metavar", flag if not flag.startswith("-") else field.name.upper())
            many = "+" if field.required else "*"
            kind.setdefault("nargs", many if shape.many or shape.base is str and not field.required else None)
            parser.add_argument(field.name, **kind)
            continue
        default = field.default if field.default is not msgspec.NODEFAULT else field.default_factory()
        if default is msgspec.UNSET:
            default = None  # said as "unchanged when not given"; the shell turns None back into UNSET
        if "choices" not in kind:
            kind.setdefault("metavar", flag.lstrip("-").replace("-", "_").upper())
        if shape.base is bool and default is False:
            parser.add_argument(flag, action="store_true", dest=field.name, help=shape.help)
        else:
            many = shape.many and not shape.nargs
            parser.add_argument(flag, default=default, action="append" if many else "store", **kind)
    hooks = shell(cls)
    if hasattr(hooks, "options"):
        hooks.options(parser)


def _json_object(text: str, flag: str) -> dict[str, Any]:
    """An option's JSON object (a context)."""
    from hebbs.errors import InvalidInput

    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"{flag} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidInput(f"{flag} must be a JSON object, e.g. '{{\"type\": \"preference\"}}'")
    return value



def _shape(type_: Any, meta: dict[str, Any] | None = None) -> Shape:
    """The field's base type, with what its annotations say (Meta extras, description)."""
    from hebbs.protocol import Micros

    meta = dict(meta or {})
    if type_ == Micros or meta.get("micros"):
        return Shape(int, micros=True, help=meta.get("help"))
    origin, args = typing.get_origin(type_), typing.get_args(type_)
    if origin is typing.Annotated:  # the outermost says it: a field's own words over its type's
        for m in type_.__metadata__:
            if isinstance(m, msgspec.Meta):
                for key, value in (m.extra or {}).items():
                    meta.setdefault(key, value)
                if m.description:
                    meta.setdefault("help", m.description)
        return _shape(args[0], meta)
    if origin is typing.Literal:
        return Shape(type(args[0]), choices=args, help=meta.get("help"))
    if origin is list:
        return _shape(args[0], meta)._replace(many=True, nargs=meta.get("nargs"))
    if origin is tuple:  # a pair, given as one text its shell reads (a time range)
        return Shape(tuple, metavar=meta.get("metavar"), help=meta.get("help"))
    if origin is dict:
        return Shape(dict, help=meta.get("help"))
    if args:  # an optional value: its non-null type
        return _shape(next(a for a in args if a is not type(None)), meta)
    choices = meta.get("choices")
    if callable(choices):  # read from where they are kept (the recall registry's strategies)
        choices = tuple(choices())
    return Shape(type_, choices=choices, short_id=bool(meta.get("short_id")), nargs=meta.get("nargs"),
                 upper=bool(meta.get("upper")), metavar=meta.get("metavar"), help=meta.get("help"))


def shell(cls: type[_Command]) -> Any:
    """The declaration's shell class (an empty one when it has none)."""
    if not cls.spec.shell:
        return object
    module, name = cls.spec.shell.split(":")
    return getattr(importlib.import_module(f"hebbs.cli.{module}"), name)


def run(args: argparse.Namespace, tag: str) -> int:
    from hebbs.client import Client
    from hebbs.paths import hebbs_home
    from hebbs.protocol import COMMAND_TYPES

    from .commands import client_for

    cls = COMMAND_TYPES[tag]
    hooks = shell(cls)
    if hasattr(hooks, "instead") and (code := hooks.instead(args)) is not None:
        return code
    fields: dict[str, Any] = {}
    spelled = flags(cls)
    for field in msgspec.structs.fields(cls):
        if not hasattr(args, field.name):
            continue
        value, shape = getattr(args, field.name), _shape(field.type)
        if isinstance(value, list) and shape.base is str and not shape.many:  # the words of a positional text
            value = " ".join(value) if value else None
        elif shape.base is dict and isinstance(value, str):
            value = _json_object(value, spelled.get(field.name, "--" + field.name.replace("_", "-")))
        fields[field.name] = value
    if hasattr(hooks, "fields"):
        fields = hooks.fields(args, fields)
    if hasattr(hooks, "send"):
        result = hooks.send(args, fields)
        if hasattr(hooks, "show"):
            return _shown(hooks, args, None, fields, result)
    else:
        # `brains(args)`: the brains asked for, and whether the command runs from anywhere (both brains
        # need no project vault here: the global one is searched alone, with a note, where client_for refuses).
        brains, anywhere = hooks.brains(args) if hasattr(hooks, "brains") else (None, False)
        with Client(home=hebbs_home(args.home)) if anywhere else client_for(args) as hb:
            # A command declared with brains goes the typed method's way, which finds their vaults.
            result = hb.call(cls, brains=brains, **fields) if cls.spec.brains else hb.request(cls(**fields))
            if hasattr(hooks, "show"):  # inside: it may read more (the texts of the ids it shows)
                return _shown(hooks, args, hb, fields, result)
    if args.format == "json":
        output.emit_json(result)
    elif cls.spec.text is not None:
        for item in result if isinstance(result, list) else [result]:  # a list: one line per item
            print(cls.spec.text.format_map({**fields, **_fields_of(item)}))
    elif _type_name(cls.spec.result) in output.TEXT:
        module, name = output.TEXT[_type_name(cls.spec.result)].split(":")
        getattr(importlib.import_module(f"hebbs.cli.{module}"), name)(result)
    elif isinstance(result, (int, float, str)):
        print(result)
    else:
        print(msgspec.json.format(msgspec.json.encode(result), indent=2).decode())
    return 0


def _shown(hooks: Any, args: argparse.Namespace, client: Any, fields: dict[str, Any], result: Any) -> int:
    """A shell's text for the reply; with --format json, the reply itself as JSON, or what the shell's
    `json(args, result)` makes of it (None: nothing, the shell printed it as it came)."""
    if args.format != "json":
        return hooks.show(args, client, fields, result) or 0
    if hasattr(hooks, "json"):
        result = hooks.json(args, result)
        if result is None:
            return 0
    output.emit_json(result)
    return 0


def _fields_of(item: Any) -> dict[str, Any]:
    """What a `text=` template may name of a reply: its fields, and `short_id` (what tables show of an id)."""
    if not isinstance(item, msgspec.Struct):
        return {}
    shown = msgspec.structs.asdict(item)
    if isinstance(shown.get("id"), str):
        shown["short_id"] = output.short_id(shown["id"])
    return shown


def _type_name(type_: Any) -> str:
    """A reply type as output.TEXT names it: `Memory`, `list[Memory]`."""
    args = typing.get_args(type_)
    if args:
        return f"{typing.get_origin(type_).__name__}[{', '.join(_type_name(a) for a in args)}]"
    return getattr(type_, "__name__", str(type_))
