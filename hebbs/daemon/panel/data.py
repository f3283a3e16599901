"""Everything the panel reads and writes, through the daemon's Handlers.

Commands the socket protocol has (recall, inspect, revise, forget, contradiction_commit, ...) are
dispatched exactly as a socket request would be. The few read-only views a page needs that the
protocol has no command for (a vault's entity counts, its graph, an entity's timeline, a batch of
memories by id) run through Handlers.call_at: the same vault slot, use counting and worker pool as
every other read. They are kept here, small, and read-only.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from hebbs.errors import NotFound
from hebbs.paths import VAULT_DIR
from hebbs.protocol import Request, _Command
from hebbs.schema import Edge, EdgeType, Memory, MemoryKind

from ..calls import memories_by_id
from .changes import STALE_COMMANDS
from .host import DaemonHost

if TYPE_CHECKING:
    from hebbs.engine import Engine

GRAPH_LIMIT = 5000
# Cytoscape's force layout (cose) is quadratic: about 2 s for 200 nodes on a loaded 2-core machine,
# 14 s for 400. Above this many nodes the server lays the graph out and the page draws it on a canvas.
PRESET_LAYOUT_ABOVE = 250
NODE_SPACING = 14.0
GOLDEN_ANGLE = math.pi * (3 - math.sqrt(5))
# A cached view is rebuilt at least this often, whatever the change notifications said.
VIEW_TTL_SECONDS = 300.0
# Decay candidates change with time, not only with writes; slowly (half-lives are days): a minute is fresh.
CANDIDATES_TTL_SECONDS = 60.0
TIMELINE_LIMIT = 1000
SOURCE_MAX_BYTES = 2 * 1024 * 1024


class _PanelConnection:
    """What a handler may touch on its connection: the panel neither subscribes nor streams."""

    def __init__(self) -> None:
        self.subscriptions: dict[str, Any] = {}

    async def progress(self, request_id: Any, data: Any) -> None:
        pass

    async def send(self, response: Any) -> None:
        pass


class PanelData:
    def __init__(self, daemon: DaemonHost) -> None:
        self.daemon = daemon
        self.handlers = daemon.handlers
        self._conn = _PanelConnection()
        # Whole-vault views (entity counts, the graph) cost a pass over every memory: kept until the
        # vault changes. Every change goes through the handlers, which tell us (Daemon.change_listeners).
        self._views: dict[str, dict[tuple[Any, ...], tuple[float, Any]]] = {}
        daemon.change_listeners.append(self._on_change)

    async def command(self, command: _Command, vault: str | None) -> Any:
        """Run one protocol command, exactly as the socket would."""
        return await self.handlers.dispatch(self._conn, Request(id="panel", command=command, vault_path=vault))

    async def view(self, vault: str, fn: Any, *args: Any) -> Any:
        return await self.handlers.call_at(vault, fn, *args)

    async def cached_view(self, vault: str, fn: Any, *args: Any) -> Any:
        return await self.cached(vault, (fn.__name__, *args), lambda: self.view(vault, fn, *args))

    async def cached(self, vault: str, key: tuple[Any, ...], make: Any, ttl: float = VIEW_TTL_SECONDS) -> Any:
        entries = self._views.setdefault(vault, {})
        hit = entries.get(key)
        if hit is not None and time.monotonic() - hit[0] < ttl:
            return hit[1]
        value = await make()
        entries[key] = (time.monotonic(), value)
        return value

    def _on_change(self, request: Request) -> None:
        if request.command.tag() in STALE_COMMANDS:
            # Which vault an index request changed is not always in vault_path: forget them all.
            self._views.clear()

    def slot_state(self, vault: str) -> Any:
        """The vault's slot in the daemon's pool (indexing flag, progress, sweeper), or None if never used."""
        for slot in self.daemon.pool.known():
            if str(slot.path) == vault:
                return slot
        return None


# Views: read-only functions of an open engine, run on the worker pool ------------------------------

class VaultSummary(msgspec.Struct, kw_only=True):
    entities: list[tuple[str, int]]
    entity_count: int
    no_entity: int
    pending_contradictions: int
    superseded: int


def summary(engine: "Engine", top: int = 12) -> VaultSummary:
    entities: Counter[str] = Counter()
    none = superseded = 0
    for memory in engine.memories():
        if memory.superseded_by:
            superseded += 1
        if memory.entity_id is None:
            none += 1
        else:
            entities[memory.entity_id] += 1
    return VaultSummary(entities=entities.most_common(top), entity_count=len(entities), no_entity=none,
                        pending_contradictions=len(engine.pending()), superseded=superseded)


def entity_names(engine: "Engine") -> list[tuple[str, int]]:
    counts = Counter(m.entity_id for m in engine.memories() if m.entity_id is not None)
    return sorted(counts.items())


class GraphNode(msgspec.Struct, kw_only=True, array_like=True):
    id: str
    label: str
    kind: str
    entity: str
    superseded: bool
    # Set for large graphs (PRESET_LAYOUT_ABOVE nodes): a force layout in the browser would take seconds.
    x: float | None = None
    y: float | None = None


class GraphView(msgspec.Struct, kw_only=True):
    nodes: list[GraphNode]
    # [source index, target index, edge type]
    edges: list[tuple[int, int, str]]
    total_nodes: int
    total_edges: int
    sampled: bool
    followed_by_hidden: bool = False
    # One node per note, its sections folded in.
    folded: bool = False


# The graph page's type filter: every edge type the schema has, so a new one shows without a change here.
EDGE_TYPES = tuple(EdgeType.__members__)


class GraphScope(msgspec.Struct, frozen=True, kw_only=True):
    """The part of a graph worth reading: a folder's notes, a tag's, or the neighbourhood of one
    note or memory. A thousand notes drawn at once are a hairball whatever the layout."""

    folder: str = ""
    tag: str = ""
    # A note's path (relative to the notes folder) or a memory's id, and how many links away to go.
    around: str = ""
    hops: int = 1


def _in_scope(memories: list[Memory], edges: list[Edge], scope: GraphScope) -> set[str]:
    """The ids of the memories (or folded notes) the scope keeps."""
    folder = scope.folder.strip("/")
    keep = {m.id for m in memories
            if (not folder or (m.source is not None and m.source.file_path.startswith(folder + "/")))
            and (not scope.tag or scope.tag in (m.context.get("tags") or ()))}
    if not scope.around:
        return keep
    seeds = {m.id for m in memories if scope.around in (m.id, m.source.file_path if m.source else None)}
    neighbours: dict[str, set[str]] = {}
    for edge in edges:
        neighbours.setdefault(edge.source, set()).add(edge.target)
        neighbours.setdefault(edge.target, set()).add(edge.source)
    reached, frontier = set(seeds), set(seeds)
    for _ in range(scope.hops):
        frontier = {n for node in frontier for n in neighbours.get(node, ())} - reached
        reached |= frontier
    return keep & reached


WHOLE_VAULT = GraphScope()


class GraphFacets(msgspec.Struct, kw_only=True):
    """What the graph page offers to narrow it by: folders (every level) and tags, each with its count
    of notes, most used first."""

    folders: list[tuple[str, int]]
    tags: list[tuple[str, int]]


def graph_facets(engine: "Engine", top: int = 200) -> GraphFacets:
    notes: dict[str, set[str]] = {}
    for memory in engine.memories():
        if memory.source is not None:
            notes.setdefault(memory.source.file_path, set()).update(memory.context.get("tags") or ())
    folders: Counter[str] = Counter()
    tags: Counter[str] = Counter()
    for path, note_tags in notes.items():
        parts = path.split("/")[:-1]
        folders.update("/".join(parts[:depth]) for depth in range(1, len(parts) + 1))
        tags.update(note_tags)
    return GraphFacets(folders=sorted(folders.most_common(top)), tags=tags.most_common(top))


def graph(engine: "Engine", fold_notes: bool = False, edge_types: tuple[str, ...] = EDGE_TYPES,
          scope: GraphScope = WHOLE_VAULT, limit: int = GRAPH_LIMIT) -> GraphView:
    """The memory graph; beyond `limit` memories, the most connected ones (then the newest) are kept.
    fold_notes: one node per note, its sections folded in (what a notes user thinks of as one thing),
    with the links between notes; only edges of `edge_types` are drawn, and only what `scope` keeps."""
    memories = list(engine.memories())
    edges: list[Edge] = []
    degree: Counter[str] = Counter()
    for memory in memories:
        for edge in engine.edges(memory.id, "out"):
            if edge.edge_type not in edge_types:
                continue
            edges.append(edge)
            degree[edge.source] += 1
            degree[edge.target] += 1
    # Folding says "notes" only where a note was there to fold: a vault of plain memories stays "memories".
    fold_notes = fold_notes and any(m.source is not None for m in memories)
    if fold_notes:
        memories, edges, degree = _folded(memories, edges)
    if scope != WHOLE_VAULT:
        kept_ids = _in_scope(memories, edges, scope)
        memories = [m for m in memories if m.id in kept_ids]
        edges = [e for e in edges if e.source in kept_ids and e.target in kept_ids]
        degree = Counter(end for e in edges for end in (e.source, e.target))
    total = len(memories)
    if total > limit:
        memories.sort(key=lambda m: (degree[m.id], m.created_at), reverse=True)
        memories = memories[:limit]
    index = {m.id: n for n, m in enumerate(memories)}
    nodes = [GraphNode(id=m.id, label=_snippet(m.content, 60), kind=m.kind.value, entity=m.entity_id or "",
                       superseded=m.superseded_by is not None) for m in memories]
    large = len(nodes) > PRESET_LAYOUT_ABOVE
    # In a large graph the layout already orders each entity's memories in time (its spiral), so the
    # FOLLOWED_BY chain, most of the edges, is left out: it halves what the browser has to build.
    kept = [(index[e.source], index[e.target], e.edge_type) for e in edges
            if e.source in index and e.target in index and not (large and e.edge_type == "FOLLOWED_BY")]
    if large:
        contradictions = [(s, t) for s, t, kind in kept if kind == "CONTRADICTS"]
        for node, (x, y) in zip(nodes, draw_apart(cluster_layout(memories), contradictions,
                                                 [m.entity_id or "" for m in memories])):
            node.x, node.y = x, y
    return GraphView(nodes=nodes, edges=kept, total_nodes=total, total_edges=len(edges), sampled=total > limit,
                     followed_by_hidden=large, folded=fold_notes)


def _folded(memories: list[Memory], edges: list[Edge]) -> tuple[list[Memory], list[Edge], Counter[str]]:
    """Each note's sections as one memory-like node (the note's first section stands for it, so a click
    opens it; its label is the note's path), and each edge between two notes once per type; edges
    inside a note (its sections' FOLLOWED_BY chain) are dropped."""
    first: dict[str, Memory] = {}
    into: dict[str, str] = {}
    for m in sorted(memories, key=lambda m: (m.created_at, m.id)):
        note = m.source.file_path if m.source is not None else None
        if note is None:
            into[m.id] = m.id
            continue
        keep = first.setdefault(note, m)
        into[m.id] = keep.id
    # The node shows the note, not its first section: it is labelled with the note's path.
    nodes = [m if m.source is None else msgspec.structs.replace(m, content=m.source.file_path,
                                                                 entity_id=m.entity_id or m.source.file_path)
             for m in memories if into.get(m.id) == m.id and (m.source is None or first.get(m.source.file_path) is m)]
    folded: dict[tuple[str, str, str], Edge] = {}
    degree: Counter[str] = Counter()
    for edge in edges:
        source, target = into.get(edge.source), into.get(edge.target)
        if source is None or target is None or source == target:
            continue
        key = (source, target, edge.edge_type)
        if key not in folded:
            folded[key] = Edge(source=source, target=target, edge_type=edge.edge_type, confidence=edge.confidence,
                               created_at=edge.created_at)
            degree[source] += 1
            degree[target] += 1
    return nodes, list(folded.values()), degree


def cluster_layout(memories: list[Memory]) -> list[tuple[float, float]]:
    """Positions for a large graph, in one pass: each entity a disc (its memories on a sunflower
    spiral, oldest in the middle), discs packed in rows, largest first. Episodes of one entity are
    chained by FOLLOWED_BY, so most edges stay inside their disc."""
    groups: dict[str, list[int]] = {}
    for i, m in enumerate(memories):
        groups.setdefault(m.entity_id or "", []).append(i)
    positions: list[tuple[float, float]] = [(0.0, 0.0)] * len(memories)
    row_width = NODE_SPACING * math.sqrt(len(memories)) * 2.6  # about the shape of a wide screen
    x = y = row_height = 0.0
    for members in sorted(groups.values(), key=len, reverse=True):
        members.sort(key=lambda i: memories[i].created_at)
        radius = NODE_SPACING * (0.6 * math.sqrt(len(members)) + 1)
        if x > 0 and x + 2 * radius > row_width:
            x, y, row_height = 0.0, y + row_height + 2 * NODE_SPACING, 0.0
        cx, cy = x + radius, y + radius
        for k, i in enumerate(members):
            r, angle = NODE_SPACING * 0.6 * math.sqrt(k), k * GOLDEN_ANGLE
            positions[i] = (round(cx + r * math.cos(angle), 1), round(cy + r * math.sin(angle), 1))
        x += 2 * radius + 2 * NODE_SPACING
        row_height = max(row_height, 2 * radius)
    return positions


def draw_apart(positions: list[tuple[float, float]], pairs: list[tuple[int, int]],
               groups: list[str]) -> list[tuple[float, float]]:
    """Contradicting memories of one entity would sit side by side on its spiral, where a dashed
    edge between neighbours is easy to miss: each pair's second memory swaps places with whichever
    memory of the same entity lies farthest from the first, so the edge spans the disc."""
    positions = list(positions)
    members: dict[str, list[int]] = {}
    for i, group in enumerate(groups):
        members.setdefault(group, []).append(i)
    for a, b in pairs:
        if groups[a] != groups[b]:
            continue  # different discs: already apart
        far = max(members[groups[a]], key=lambda i: math.dist(positions[a], positions[i]))
        if far != a:
            positions[b], positions[far] = positions[far], positions[b]
    return positions


def timeline(engine: "Engine", entity: str | None, kind: str | None, limit: int = TIMELINE_LIMIT
             ) -> tuple[list[Memory], int]:
    """An entity's memories (every memory when entity is None), oldest first; the newest `limit` of them."""
    chosen = [m for m in engine.memories() if (entity is None or m.entity_id == entity)
              and (kind is None or m.kind.value == kind)]
    chosen.sort(key=lambda m: m.created_at)
    return chosen[-limit:], len(chosen)


def supersession(engine: "Engine", memory: Memory) -> tuple[list[Memory], list[Memory]]:
    """(what this memory replaced, oldest first; what replaced it, in order)."""
    earlier: list[Memory] = []
    current = memory
    seen = {memory.id}
    while True:
        older = [e.target for e in engine.edges(current.id, "out") if e.edge_type == "REVISED_FROM"]
        found = [m for m in memories_by_id(engine, older).values()
                 if m.kind != MemoryKind.REVISION and m.id not in seen]
        if not found:
            break
        current = found[0]
        seen.add(current.id)
        earlier.append(current)
    later: list[Memory] = []
    current = memory
    while current.superseded_by and current.superseded_by not in seen:
        seen.add(current.superseded_by)
        newer = memories_by_id(engine, [current.superseded_by]).get(current.superseded_by)
        if newer is None:
            break
        later.append(newer)
        current = newer
    return list(reversed(earlier)), later


# Sources: the notes file a memory was indexed from ---------------------------------------------------

class SourceSection(msgspec.Struct, kw_only=True):
    file: str
    text: str
    start: int
    end: int
    line_start: int
    line_end: int


def notes_root(vault: str, home: Path) -> Path | None:
    """The notes folder a project vault indexes (its .hebbs directory's parent); None for the global brain."""
    path = Path(vault)
    if path.name != VAULT_DIR or path.resolve() == home.resolve():
        return None
    return path.parent


def read_source(vault: str, home: Path, memory: Memory) -> SourceSection:
    """The file a memory came from, with its section's byte range; never a file outside the notes folder."""
    root = notes_root(vault, home)
    if memory.source is None or root is None:
        raise NotFound("this memory was not indexed from a notes file")
    root = root.resolve()
    path = (root / memory.source.file_path).resolve()
    if not path.is_relative_to(root) or VAULT_DIR in path.relative_to(root).parts:
        raise NotFound("the memory's source is outside its notes folder")
    try:
        raw = path.read_bytes()[:SOURCE_MAX_BYTES]
    except OSError as exc:
        raise NotFound(f"{memory.source.file_path} cannot be read now: {exc.strerror}") from None
    start, end = memory.source.byte_start, memory.source.byte_end or len(raw)
    return SourceSection(file=memory.source.file_path, text=raw.decode("utf-8", errors="replace"),
                         start=len(raw[:start].decode("utf-8", errors="replace")),
                         end=len(raw[:end].decode("utf-8", errors="replace")),
                         line_start=raw[:start].count(b"\n") + 1, line_end=raw[:max(start, end - 1)].count(b"\n") + 1)


def line_range(vault: str, home: Path, memory: Memory) -> tuple[int, int] | None:
    try:
        section = read_source(vault, home, memory)
    except NotFound:
        return None
    return section.line_start, section.line_end


def _snippet(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n - 1] + "…"
