"""Argument checks shared by the engine's public methods: each raises InvalidInput with a message that names the field."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import msgspec

from .errors import InvalidInput
from .schema import EdgeType, MemoryKind

MAX_TOP_K = 1000
MAX_CONTENT_CHARS = 1_000_000
# The last microsecond of year 9999 UTC: past it no date library (Python's datetime included) can
# show the time, so a stored value beyond it would break every command that prints it.
MAX_TIMESTAMP_US = 253_402_300_800_000_000 - 1


def content(value: Any, field: str = "content") -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InvalidInput(f"{field} must not be empty")
    if len(value) > MAX_CONTENT_CHARS:
        raise InvalidInput(f"{field} is {len(value)} characters; the limit is {MAX_CONTENT_CHARS}")
    return value


def unit_float(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidInput(f"{field} must be a number from 0 to 1, got {value!r}")
    if not 0.0 <= value <= 1.0:
        raise InvalidInput(f"{field} must be from 0 to 1, got {value}")
    return float(value)


def context(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"context must be a JSON object (dict), got {type(value).__name__}")
    try:
        # Round-trip through JSON so the stored context is exactly what a JSON client would read back.
        return msgspec.json.decode(msgspec.json.encode(value))
    except (TypeError, msgspec.EncodeError, OverflowError) as exc:
        raise InvalidInput(f"context must be JSON-serializable: {exc}") from None


def entity(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"entity_id must be a non-empty string or None, got {value!r}")
    if len(value.encode()) > 512:
        raise InvalidInput("entity_id is longer than 512 bytes")
    if value in ("__global__", "__all__"):
        raise InvalidInput(f"entity_id {value!r} is reserved")
    return value


def timestamp_us(value: Any, field: str) -> int | None:
    """A tz-aware datetime or integer microseconds since the epoch."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidInput(f"{field} must be timezone-aware (naive datetimes are ambiguous)")
        return int(round(value.timestamp() * 1_000_000))
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise InvalidInput(f"{field} must not be negative")
        if value > MAX_TIMESTAMP_US:
            raise InvalidInput(f"{field} must be before year 10000 (at most {MAX_TIMESTAMP_US} microseconds), "
                               f"got {value}")
        return value
    raise InvalidInput(f"{field} must be a timezone-aware datetime or microseconds since the epoch, got {value!r}")


def time_range(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise InvalidInput("time_range must be a pair (start, end); either may be None")
    start = timestamp_us(value[0], "time_range start")
    end = timestamp_us(value[1], "time_range end")
    start = 0 if start is None else start
    end = 2**63 - 1 if end is None else end
    if start > end:
        raise InvalidInput("time_range start is after its end")
    return start, end


def top_k(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"top_k must be an integer, got {value!r}")
    if not 1 <= value <= MAX_TOP_K:
        raise InvalidInput(f"top_k must be from 1 to {MAX_TOP_K}, got {value}")
    return value


def memory_id(value: Any, field: str = "id") -> str:
    from ulid import ULID

    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a ULID string, got {type(value).__name__}")
    try:
        return str(ULID.from_str(value))
    except ValueError:
        raise InvalidInput(f"{field} {value!r} is not a valid memory id (a 26-character ULID)") from None


def memory_kind(value: Any) -> MemoryKind:
    try:
        return MemoryKind(value.value if isinstance(value, MemoryKind) else value)
    except ValueError:
        raise InvalidInput(f"kind must be one of {[k.value for k in MemoryKind]}, got {value!r}") from None


def edge_type(value: Any) -> EdgeType:
    if isinstance(value, EdgeType):
        return value
    if isinstance(value, str) and value.upper() in EdgeType.__members__:
        return EdgeType[value.upper()]
    raise InvalidInput(f"edge type must be one of {list(EdgeType.__members__)}, got {value!r}")


def edge_spec(value: Any) -> tuple[str, EdgeType, float]:
    """An edge a new memory starts with: (target_id, edge type[, confidence])."""
    if not isinstance(value, (tuple, list)) or len(value) not in (2, 3):
        raise InvalidInput(f"an edge is (target_id, edge_type[, confidence]), got {value!r}")
    target = memory_id(value[0], "edge target")
    confidence = unit_float(value[2], "edge confidence") if len(value) == 3 else 1.0
    return target, edge_type(value[1]), confidence
