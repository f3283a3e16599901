"""A declared command as an engine call: the Engine method its declaration names (hebbs.protocol,
`@declare(engine=...)`), given the request's fields with every ShortId resolved to a full id (a KeptId no memory ends with
goes as given: a forgotten memory's kept original may still answer to it)."""

from __future__ import annotations

import itertools
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
    ids = short_id_fields(type(command))
    kept = short_id_fields(type(command), "kept")

    def call(engine: "Engine") -> Any:
        args = {name: _resolved(engine, getattr(command, name)) for name in names}
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
