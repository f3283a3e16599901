"""Causal recall: a breadth-first walk of typed graph edges from one seed memory.

Edges are stored source -> target (`A CAUSED_BY B` points from an effect A to its cause B). A
forward walk follows edges the way they point, backward walks them in reverse (from a cause to its
effects), and both does either. Relevance falls with depth; inside one depth it falls with the
confidence of the path (the product of its edges' confidences), so a confident link always ranks
above a doubtful one at the same distance but never above a nearer memory.

The walk goes through memories the call's filters exclude (another entity, outside the time range,
superseded) because a chain of causes does not stop at a filter; those memories are simply not
returned. REVISION records are never entered: they are old text, not events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidInput
from ..schema import EdgeType, MemoryKind
from ..core.open_vault import Filter, OpenVault
from ..store.contract import RecordStore
from .fusion import Candidate, Candidates
from .query import Found, Query


DIRECTIONS = ("forward", "backward", "both")
MAX_DEPTH_LIMIT = 20
# FOLLOWED_BY links every memory to the next one of its entity automatically: it is sequence, not
# cause, and following it by default would turn every causal walk into a walk through time.
# CO_ACTIVATED says two memories were used together, not that one caused the other.
DEFAULT_EDGE_TYPES: frozenset[EdgeType] = frozenset(
    t for t in EdgeType if t not in (EdgeType.FOLLOWED_BY, EdgeType.CO_ACTIVATED))
# How many memories one walk may visit: bounds the cost of a walk through a dense region.
VISIT_LIMIT = 20_000


@dataclass
class Hop:
    """How a memory was reached: the edge's type, which way it was walked, and its confidence."""

    edge_type: str
    direction: str  # "forward" or "backward"
    confidence: float


@dataclass
class Reached:
    memory_id: str
    depth: int
    path: list[str]  # memory ids from the seed to this memory
    hops: list[Hop] = field(default_factory=list)
    confidence: float = 1.0  # product of the hops' confidences


@dataclass
class Walk:
    seed: str
    reached: list[Reached]  # breadth-first order, the seed first
    edges_seen: int  # edges of the wanted types and direction found on the way
    truncated: bool  # the visit limit stopped the walk early


def check_direction(direction: Any) -> str:
    if direction not in DIRECTIONS:
        raise InvalidInput(f"direction must be one of {list(DIRECTIONS)}, got {direction!r}")
    return direction


def check_depth(max_depth: Any) -> int:
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or not 1 <= max_depth <= MAX_DEPTH_LIMIT:
        raise InvalidInput(f"max_depth must be an integer from 1 to {MAX_DEPTH_LIMIT}, got {max_depth!r}")
    return max_depth


def check_edge_types(edge_types: Iterable[str | EdgeType] | None) -> frozenset[EdgeType]:
    if edge_types is None:
        return DEFAULT_EDGE_TYPES
    if isinstance(edge_types, (str, EdgeType)):
        edge_types = [edge_types]
    out: set[EdgeType] = set()
    for value in edge_types:
        if isinstance(value, EdgeType):
            out.add(value)
        elif isinstance(value, str) and value.upper() in EdgeType.__members__:
            out.add(EdgeType[value.upper()])
        else:
            raise InvalidInput(f"edge type must be one of {list(EdgeType.__members__)}, got {value!r}")
    if not out:
        raise InvalidInput("edge_types must name at least one edge type (or be None for the default set)")
    return frozenset(out)


def walk(store: RecordStore, seed: str, *, direction: str, max_depth: int, edge_types: frozenset[EdgeType],
         enterable: Callable[[str], bool], visit_limit: int = VISIT_LIMIT,
         enough: Callable[[dict[str, Reached]], bool] | None = None) -> Walk:
    """Breadth-first from seed; each memory appears once, at its smallest depth, by its most confident path.

    `enough` is asked after each complete level: once the caller has as many memories as it can
    use, deeper levels could only add memories it would cut (results are taken nearest first).
    """
    seed_node = Reached(seed, 0, [seed])
    best: dict[str, Reached] = {seed: seed_node}
    frontier = [seed_node]
    edges_seen = 0
    truncated = False
    for depth in range(1, max_depth + 1):
        level: dict[str, Reached] = {}
        for node in frontier:
            for edge_type, other, confidence, hop_direction in _neighbours(store, node.memory_id, direction):
                if edge_type not in edge_types:
                    continue
                edges_seen += 1
                if other in best or not enterable(other):
                    continue
                path_confidence = node.confidence * confidence
                have = level.get(other)
                if have is None or path_confidence > have.confidence:
                    level[other] = Reached(other, depth, node.path + [other],
                                           node.hops + [Hop(edge_type.name, hop_direction, confidence)],
                                           path_confidence)
        if not level:
            break
        # Confident paths first, so the visit limit cuts the doubtful ones.
        ordered = sorted(level.values(), key=lambda r: r.confidence, reverse=True)
        room = visit_limit - len(best)
        if len(ordered) > room:
            ordered, truncated = ordered[:max(0, room)], True
        for node in ordered:
            best[node.memory_id] = node
        frontier = ordered
        if truncated or (enough is not None and enough(best)):
            break
    reached = sorted(best.values(), key=lambda r: (r.depth, -r.confidence))
    return Walk(seed, reached, edges_seen, truncated)


def _neighbours(store: RecordStore, memory_id: str, direction: str) -> Iterable[tuple[EdgeType, str, float, str]]:
    if direction in ("forward", "both"):
        for edge_type, target, confidence, _ in store.edges_from(memory_id):
            yield edge_type, target, confidence, "forward"
    if direction in ("backward", "both"):
        for edge_type, source, confidence, _ in store.edges_to(memory_id):
            yield edge_type, source, confidence, "backward"


def relevance(depth: int, confidence: float, max_depth: int) -> float:
    """1 for the seed, falling by one step per depth; a path's doubt costs at most half a step."""
    step = 1.0 / (max_depth + 1)
    if depth == 0:
        return 1.0
    return max(0.0, 1.0 - depth * step - 0.5 * step * (1.0 - min(1.0, max(0.0, confidence))))


def candidates(result: Walk, allowed: Filter, max_depth: int, limit: int) -> Candidates:
    """The walk's memories that pass the call's filters, nearest first, at most `limit`."""
    out: Candidates = {}
    for node in result.reached:
        if len(out) >= limit:
            break
        if not allowed(node.memory_id):
            continue
        details: dict[str, Any] = {
            "causal_depth": node.depth,
            "causal_seed": result.seed,
            "causal_path": list(node.path),
            "causal_edge_types": [h.edge_type for h in node.hops],
            "causal_directions": [h.direction for h in node.hops],
            "causal_confidence": round(node.confidence, 6),
        }
        if node.hops:
            details["causal_edge"] = node.hops[-1].edge_type
        out[node.memory_id] = Candidate(relevance(node.depth, node.confidence, max_depth), ["causal"], details)
    return out


def notes_for(result: Walk, found: Candidates, direction: str, edge_types: frozenset[EdgeType]) -> list[str]:
    """What the caller must know: no silent fallback when the graph had nothing to give."""
    names = ",".join(sorted(t.name for t in edge_types))
    notes: list[str] = []
    reached = len(result.reached) - 1
    if result.edges_seen == 0:
        notes.append(f"causal: seed {result.seed} has no {names} edges in direction {direction}; "
                     "returning the seed alone")
    elif reached == 0:
        notes.append(f"causal: the {names} edges of seed {result.seed} in direction {direction} reach no other "
                     "memory (only revision records or itself); returning the seed alone")
    elif len(found) <= (1 if result.seed in found else 0):
        notes.append(f"causal: the walk from seed {result.seed} reached {reached} memories "
                     "but none passed the recall filters")
    if result.truncated:
        notes.append(f"causal: the walk stopped after visiting {VISIT_LIMIT} memories; deeper ones are missing")
    return notes


def recall(vault: OpenVault, query: Query) -> Found:
    """The causal strategy: (candidates, notes). Without a seed id, the cue's best similarity hit is the seed."""
    direction = check_direction(query.direction)
    max_depth = check_depth(query.max_depth)
    types = check_edge_types(query.edge_types)
    allowed, limit, seed = query.allowed, query.limit, query.seed
    notes: list[str] = []
    if seed is None:
        cue_vector = query.cue_vector
        if cue_vector is None:
            raise InvalidInput("causal recall needs a seed memory id, or a cue to find one")
        hits = vault.similar(cue_vector, 1, allowed)
        if not hits:
            return {}, ["causal: no memory matches the cue, so there is no seed to walk from"]
        seed = hits[0][0]
        notes.append(f"causal: seed {seed} is the cue's best similarity match ({hits[0][1]:.3f})")

    def enterable(mid: str) -> bool:
        entry = vault.entry(mid)
        return entry is not None and entry.kind != MemoryKind.REVISION

    def enough(reached: dict[str, Reached]) -> bool:
        return sum(1 for mid in reached if allowed(mid)) >= limit

    result = walk(vault.store, seed, direction=direction, max_depth=max_depth, edge_types=types,
                  enterable=enterable, enough=enough)
    found = candidates(result, allowed, max_depth, limit)
    return found, notes + notes_for(result, found, direction, types)
