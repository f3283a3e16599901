"""CLI subcommands built from a command's declaration alone (hebbs.protocol, `@declare(cli=NAME)`).

The request Struct is the whole specification: each required field becomes a positional argument,
each other field an option (`--field-name`, or the declaration's `flags=` spelling) with the field's
own default, type and description, a bool that is off by default a flag, a time (Micros) ISO 8601
text or microseconds; the Struct's docstring is the help. The body sends the request and prints its
reply: JSON with `--format json`; else the declaration's `text=` template (a line per item of a list),
or what output.py prints for the reply's type, or the reply as indented JSON (or the bare value).
Commands whose options are more than their fields keep a hand-written body instead (commands.py and
its siblings).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import typing
from typing import Any, NamedTuple

import msgspec

from hebbs.protocol import COMMAND_TYPES, Micros, _Command

from . import output


def declared() -> dict[str, type[_Command]]:
    """{CLI name: request Struct} of every command declared with a CLI name."""
    return {cls.spec.cli: cls for cls in COMMAND_TYPES.values() if cls.spec.cli}


def summary(cls: type[_Command]) -> str:
    return inspect.cleandoc(cls.__doc__ or "").split("\n\n")[0].replace("\n", " ")


class Shape(NamedTuple):
    """What the CLI needs to know of a field's type."""

    base: Any
    many: bool = False
    choices: tuple[Any, ...] | None = None
    short_id: bool = False
    micros: bool = False
    upper: bool = False
    metavar: str | None = None
    help: str | None = None


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
            kind.update(type=_micros, metavar="TIME")
        elif shape.base is float:
            kind["type"] = output.number
        elif shape.base is int:
            kind["type"] = int
        if shape.metavar:
            kind["metavar"] = shape.metavar
        if shape.short_id:
            kind["help"] = kind["help"] or "a memory id, or its last 6+ characters"
            if field.name in ("id", "ids"):
                kind["metavar"] = "ID"
        if field.required:
            kind.pop("dest")
            kind.setdefault("metavar", field.name.upper())
            parser.add_argument(field.name, nargs="+" if shape.many else None, **kind)
            continue
        default = field.default if field.default is not msgspec.NODEFAULT else field.default_factory()
        flag = spelled.get(field.name, "--" + field.name.replace("_", "-"))
        if "choices" not in kind:
            kind.setdefault("metavar", flag.lstrip("-").replace("-", "_").upper())
        if shape.base is bool and default is False:
            parser.add_argument(flag, action="store_true", dest=field.name, help=shape.help)
        else:
            parser.add_argument(flag, default=default, action="append" if shape.many else "store", **kind)


def _micros(text: str) -> int | None:
    """An option's time: ISO 8601 text or microseconds; argparse says what is wrong with it."""
    from hebbs.errors import InvalidInput

    from .commands import _time

    try:
        return _time(text, "time")
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _shape(type_: Any, meta: dict[str, Any] | None = None) -> Shape:
    """The field's base type, with what its annotations say (Meta extras, description)."""
    meta = dict(meta or {})
    if type_ == Micros:
        return Shape(int, micros=True, help=meta.get("help"))
    origin, args = typing.get_origin(type_), typing.get_args(type_)
    if origin is typing.Annotated:
        for m in type_.__metadata__:
            if isinstance(m, msgspec.Meta):
                meta.update(m.extra or {})
                if m.description:
                    meta["help"] = m.description
        return _shape(args[0], meta)
    if origin is typing.Literal:
        return Shape(type(args[0]), choices=args, help=meta.get("help"))
    if origin is list:
        return _shape(args[0], meta)._replace(many=True)
    if args:  # an optional value: its non-null type
        return _shape(next(a for a in args if a is not type(None)), meta)
    return Shape(type_, choices=meta.get("choices"), short_id=bool(meta.get("short_id")),
                 upper=bool(meta.get("upper")), metavar=meta.get("metavar"), help=meta.get("help"))


def run(args: argparse.Namespace, cls: type[_Command]) -> int:
    from .commands import client_for

    fields = {f.name: getattr(args, f.name) for f in msgspec.structs.fields(cls)}
    with client_for(args) as hb:
        result = hb.request(cls(**fields))
    if args.format == "json":
        output.emit_json(result)
    elif cls.spec.text is not None:
        for item in result if isinstance(result, list) else [result]:  # a list: one line per item
            print(cls.spec.text.format_map({**fields, **_shown(item)}))
    elif _type_name(cls.spec.result) in output.TEXT:
        module, name = output.TEXT[_type_name(cls.spec.result)].split(":")
        getattr(importlib.import_module(f"hebbs.cli.{module}"), name)(result)
    elif isinstance(result, (int, float, str)):
        print(result)
    else:
        print(msgspec.json.format(msgspec.json.encode(result), indent=2).decode())
    return 0


def _shown(item: Any) -> dict[str, Any]:
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
