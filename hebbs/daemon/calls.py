"""A declared command as an engine call: the Engine method its declaration names (hebbs.protocol,
`@declare(engine=...)`), given the request's fields with every ShortId resolved to a full id (a KeptId no memory ends with
goes as given: a forgotten memory's kept original may still answer to it); a batch command's one item as a batch of
one (`batch=`: remember)."""

from __future__ import annotations

import functools
import itertools
import typing
from typing import TYPE_CHECKING, Any, Callable

import msgspec

from hebbs.errors import InvalidInput, NotFound
from hebbs.protocol import SHORT_ID_MIN, _Command, short_id_fields
from hebbs.schema import Memory

if TYPE_CHECKING:
    from hebbs.engine import Engine

ULID_LENGTH = 26


def engine_call(command: _Command) -> Callable[["Engine"], Any]:
    """The Engine method a command declares, called with the command's fields: a field `id` first, the
    others by name (skipping those the declaration lists and "unchanged" ones), every ShortId resolved."""
    spec = command.spec
    method, reply = spec.engine, spec.reply
    assert method is not None, f"{command.tag()} declares no engine method"
    names = [name for name in command.__struct_fields__ if name not in spec.skip]
    given = {name: getattr(command, name) for name in names}
    if spec.batch is not None:  # checked now, before any vault is touched
        given, one = _batch(command, given)
        if one:
            reply = (lambda answers: answers[0]) if reply is None else (lambda answers: spec.reply(answers[0]))
    ids = short_id_fields(type(command))
    kept = short_id_fields(type(command), "kept")

    def call(engine: "Engine") -> Any:
        args = {name: _resolved(engine, value) for name, value in given.items()}
        args = {name: value for name, value in args.items() if value is not msgspec.UNSET}
        for name in ids:
            if name in args and args[name] is not None:
                try:
                    args[name] = _resolve_any(engine, args[name])
                except NotFound:
                    if name not in kept:
                        raise
        positional = [args.pop("id")] if "id" in args else []
        result = getattr(engine, method)(*positional, **args)
        return result if reply is None else reply(result)
    return call


@functools.cache
def _item_type(cls: type[_Command]) -> type[msgspec.Struct]:
    """The item type of a command's batch field (list[RememberItem] | None: RememberItem)."""
    field = next(f for f in msgspec.structs.fields(cls) if f.name == cls.spec.batch)
    return next(a for a in typing.get_args(field.type) if a is not type(None)).__args__[0]


def _batch(command: _Command, given: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """A batch command's engine arguments (its batch, one item as a batch of one, and the fields of no
    item), and whether it was one item."""
    field, item = command.spec.batch, _item_type(type(command))
    one = {name: given.pop(name) for name in item.__struct_fields__ if name in given}
    required = [f.name for f in msgspec.structs.fields(item) if f.required]
    named = " and ".join(required)
    if given[field] is not None:
        if any(one[name] is not None for name in required):
            raise InvalidInput(f"{command.tag()} takes {named} (one item) or {field} (a batch), not both")
        return given, False
    if any(one[name] is None for name in required):
        raise InvalidInput(f"{command.tag()} needs {named} (or {field} for a batch)")
    return {**given, field: [item(**one)]}, True


def _resolve_any(engine: "Engine", value: Any) -> Any:
    return [resolve_id(engine, v) for v in value] if isinstance(value, list) else resolve_id(engine, value)


def _resolved(engine: "Engine", value: Any) -> Any:
    """A list of request Structs that hold ShortIds (revise_many's items) as the engine's dicts: ids
    resolved, "unchanged" fields left out. Any other value as it is."""
    if not (isinstance(value, list) and value and isinstance(value[0], msgspec.Struct)):
        return value
    ids = short_id_fields(type(value[0]))
    if not ids:
        return value
    out = []
    for item in value:
        plain = {name: getattr(item, name) for name in item.__struct_fields__
                 if getattr(item, name) is not msgspec.UNSET}
        for name in ids:
            if plain.get(name) is not None:
                plain[name] = _resolve_any(engine, plain[name])
        out.append(plain)
    return out


def memories_by_id(engine: "Engine", ids: list[str]) -> dict[str, Memory]:
    """{id: its memory} for each of these ids that names one (what the panel and `list` show beside an id
    that may be gone)."""
    out: dict[str, Memory] = {}
    for mid in dict.fromkeys(ids):
        try:
            out[mid] = engine.get(mid)
        except (NotFound, InvalidInput):
            continue
    return out


def resolve_id(engine: "Engine", text: str) -> str:
    """A full ULID as is; a shorter text as the unique memory id ending with it (what text output shows)."""
    if len(text) >= ULID_LENGTH:
        return text
    if len(text) < SHORT_ID_MIN:
        raise InvalidInput(f"id {text!r} is too short: give the full id or at least its last {SHORT_ID_MIN} characters")
    suffix = text.upper()
    ids = (m.id for m in engine.memories(include_revisions=True) if m.id.endswith(suffix))
    matches = list(itertools.islice(ids, 2))
    if not matches:
        raise NotFound(f"no memory id ends with {text!r}")
    if len(matches) > 1:
        raise InvalidInput(f"id suffix {text!r} is ambiguous: give more characters")
    return matches[0]
