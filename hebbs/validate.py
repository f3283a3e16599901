"""Argument checks shared by the engine's public methods: each raises InvalidInput with a message that names the field."""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from .errors import InvalidInput
from .schema import EdgeType, MemoryKind, ScoringWeights

MAX_TOP_K = 1000
MAX_CONTENT_CHARS = 1_000_000
# The last microsecond of year 9999 UTC: past it no date library (Python's datetime included) can
# show the time, so a stored value beyond it would break every command that prints it.
MAX_TIMESTAMP_US = 253_402_300_800_000_000 - 1
# Limits the engine and the daemon share (hebbs/protocol.py refuses requests that nest deeper than
# MAX_NESTING or hold an integer outside INT64; `queries` is capped at MAX_QUERIES), so a call behaves
# alike in process and through a client.
MAX_NESTING = 64
INT64 = (-(2**63), 2**63 - 1)
MAX_QUERIES = 10_000
EDGE_DIRECTIONS = ("out", "in", "both")


# The longest name one directory entry may have on Linux and macOS (NAME_MAX), in bytes.
NAME_MAX = 255


def path_problem(path: str) -> str | None:
    """Why no system call would take `path` (a NUL byte, a lone surrogate, one component over NAME_MAX
    bytes), or None; said at the edge instead of as the OSError a later open would raise."""
    if "\x00" in path:
        return "holds a NUL byte, which no path may hold"
    try:
        raw = path.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"is not valid Unicode: it holds a lone surrogate at character {exc.start}"
    longest = max((len(part) for part in raw.split(b"/")), default=0)
    if longest > NAME_MAX:
        return f"has a component of {longest} bytes: a file or folder name is at most {NAME_MAX} bytes"
    return None


def unicode_text(value: str, field: str) -> str:
    """value, refused when it holds a lone surrogate: such a string cannot be stored or tokenized.
    Nearly free for ASCII text (str.isascii reads a flag)."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInput(f"{field} is not valid Unicode: it holds a lone surrogate "
                               f"{value[exc.start]!r} at character {exc.start}") from None
    return value


def content(value: Any, field: str = "content") -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InvalidInput(f"{field} must not be empty")
    if len(value) > MAX_CONTENT_CHARS:
        raise InvalidInput(f"{field} is {len(value)} characters; the limit is {MAX_CONTENT_CHARS}")
    unicode_text(value, field)
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
    problem = structure_problem(value, "context", _shown_int)
    if problem:
        raise InvalidInput(problem)
    try:
        # Round-trip through JSON so the stored context is exactly what a JSON client would read back.
        return msgspec.json.decode(msgspec.json.encode(value))
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"context is not valid Unicode: it holds a lone surrogate "
                           f"{exc.object[exc.start]!r}") from None
    except (TypeError, msgspec.EncodeError, OverflowError, RecursionError) as exc:
        raise InvalidInput(f"context must be JSON-serializable: {exc}") from None


def structure_problem(value: Any, what: str, show: Callable[[int], str]) -> str | None:
    """What JSON storage cannot hold anywhere in value: nesting deeper than MAX_NESTING levels, or an
    integer outside INT64 (the storage format holds 64 bits); None when there is neither. Iterative,
    so no depth can overflow the stack. The daemon checks every request with it, the engine a context."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, (list, tuple, set, frozenset)):
            if isinstance(item, int) and not INT64[0] <= item <= INT64[1]:
                return f"{what} holds an integer {show(item)} that does not fit in 64 bits"
            continue
        if depth > MAX_NESTING:
            return f"{what} nests deeper than {MAX_NESTING} levels"
        stack.extend((v, depth + 1) for v in item)
    return None


def _shown_int(value: int) -> str:
    return str(value) if value.bit_length() <= 128 else f"of {value.bit_length()} bits"


def scope_name(value: Any, name: str) -> str | None:
    """An author, agent or session (schema.Memory, Origin): a non-empty string of at most 512 bytes, or None."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{name} must be a non-empty string or None, got {value!r}")
    unicode_text(value, name)
    if len(value.encode()) > 512:
        raise InvalidInput(f"{name} is longer than 512 bytes")
    return value


def entity(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"entity_id must be a non-empty string or None, got {value!r}")
    unicode_text(value, "entity_id")
    if len(value.encode()) > 512:
        raise InvalidInput("entity_id is longer than 512 bytes")
    if value in ("__global__", "__all__"):
        raise InvalidInput(f"entity_id {value!r} is reserved")
    return value


_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")


def timestamp_us(value: Any, field: str, *, day_end: bool = False) -> int | None:
    """A tz-aware datetime, an ISO 8601 text (UTC when it names no offset) or integer microseconds
    since the epoch. With day_end (the end of a range), a date alone ("2026-03-31") is the last
    microsecond of that UTC day: a range "..2026-03-31" includes the whole 31st, not its midnight."""
    if value is None:
        return None
    if day_end and isinstance(value, str) and _DATE_ONLY.fullmatch(value.strip()):
        start = timestamp_us(value.strip(), field)
        return start + 86_400_000_000 - 1
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInput(f"{field} {value!r} is not an ISO 8601 time") from None
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
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
    raise InvalidInput(f"{field} must be a timezone-aware datetime, an ISO 8601 text or microseconds since the "
                       f"epoch, got {value!r}")


def time_range(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise InvalidInput("time_range must be a pair (start, end); either may be None")
    start = timestamp_us(value[0], "time_range start")
    end = timestamp_us(value[1], "time_range end", day_end=True)
    start = 0 if start is None else start
    end = 2**63 - 1 if end is None else end
    if start > end:
        raise InvalidInput("time_range start is after its end")
    return start, end


def positive_int(value: Any, field: str, limit: int) -> int:
    """An integer from 1 to limit."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{field} must be an integer, got {value!r}")
    if not 1 <= value <= limit:
        raise InvalidInput(f"{field} must be from 1 to {limit}, got {value}")
    return value


def top_k(value: Any, field: str = "top_k") -> int:
    # positive_int(value, field, MAX_TOP_K) written out: every recall calls this.
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{field} must be an integer, got {value!r}")
    if not 1 <= value <= MAX_TOP_K:
        raise InvalidInput(f"{field} must be from 1 to {MAX_TOP_K}, got {value}")
    return value


def edge_direction(value: Any) -> str:
    if not isinstance(value, str) or value not in EDGE_DIRECTIONS:
        raise InvalidInput(f"direction must be one of {list(EDGE_DIRECTIONS)}, got {value!r}")
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


WEIGHT_NAMES = tuple(ScoringWeights.__struct_fields__)


def scoring_weights(value: Any) -> ScoringWeights:
    """A ScoringWeights from one, from a mapping of some of its fields (the others keep their
    defaults), or from four numbers in field order (relevance, recency, importance, reinforcement)."""
    if isinstance(value, ScoringWeights):
        return value
    if isinstance(value, Mapping):
        unknown = [name for name in value if name not in WEIGHT_NAMES]
        if unknown:
            raise InvalidInput(f"unknown scoring weights {unknown}; known: {', '.join(WEIGHT_NAMES)}")
        return ScoringWeights(**value)
    if isinstance(value, (tuple, list)) and len(value) == len(WEIGHT_NAMES):
        return ScoringWeights(**dict(zip(WEIGHT_NAMES, value)))
    raise InvalidInput(f"weights must be a ScoringWeights, a mapping of {', '.join(WEIGHT_NAMES)}, or those four "
                       f"numbers in that order, got {type(value).__name__}")
