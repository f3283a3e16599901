"""CLI subcommands built from a command's declaration alone (hebbs.protocol, `@declare(cli=NAME)`).

The request Struct is the whole specification: each required field becomes a positional argument,
each other field an option (`--field-name`) with the field's own default and type, a bool that is
off by default a flag; the Struct's docstring is the help. The body sends the request and prints its
reply: JSON with `--format json`, else the reply as indented JSON (or the bare value). Commands
whose output people read every day keep a hand-written body instead (commands.py and its siblings).
"""

from __future__ import annotations

import argparse
import inspect
import typing
from typing import Any

import msgspec

from hebbs.protocol import COMMAND_TYPES, ShortId, _Command

from . import output


def declared() -> dict[str, type[_Command]]:
    """{CLI name: request Struct} of every command declared with a CLI name."""
    return {cls.spec.cli: cls for cls in COMMAND_TYPES.values() if cls.spec.cli}


def summary(cls: type[_Command]) -> str:
    return inspect.cleandoc(cls.__doc__ or "").split("\n\n")[0].replace("\n", " ")


def add_arguments(parser: argparse.ArgumentParser, cls: type[_Command]) -> None:
    for field in msgspec.structs.fields(cls):
        base, choices, many = _shape(field.type)
        kind: dict[str, Any] = {"dest": field.name}
        if choices:
            kind["choices"] = choices
        elif base in (int, float):
            kind["type"] = base
        if field.required:
            kind.pop("dest")
            parser.add_argument(field.name, nargs="+" if many else None,
                                metavar="ID" if base is ShortId else field.name.upper(),
                                help="a memory id, or its last 6+ characters" if base is ShortId else None, **kind)
            continue
        default = field.default if field.default is not msgspec.NODEFAULT else field.default_factory()
        flag = "--" + field.name.replace("_", "-")
        if base is bool and default is False:
            parser.add_argument(flag, action="store_true", dest=field.name)
        else:
            parser.add_argument(flag, default=default, action="append" if many else "store", **kind)


def _shape(type_: Any) -> tuple[Any, tuple[Any, ...] | None, bool]:
    """(the field's base type, its Literal choices, whether it is a list)."""
    if type_ == ShortId:
        return ShortId, None, False
    origin, args = typing.get_origin(type_), typing.get_args(type_)
    if origin is typing.Annotated:
        return _shape(args[0])
    if origin is typing.Literal:
        return type(args[0]), args, False
    if origin is list:
        base, choices, _ = _shape(args[0])
        return base, choices, True
    if args:  # an optional value: its non-null type
        return _shape(next(a for a in args if a is not type(None)))
    return type_, None, False


def run(args: argparse.Namespace, cls: type[_Command]) -> int:
    from .commands import client_for

    fields = {f.name: getattr(args, f.name) for f in msgspec.structs.fields(cls)}
    with client_for(args) as hb:
        result = hb.request(cls(**fields))
    if args.format == "json":
        output.emit_json(result)
    elif isinstance(result, (int, float, str)):
        print(result)
    else:
        print(msgspec.json.format(msgspec.json.encode(result), indent=2).decode())
    return 0
