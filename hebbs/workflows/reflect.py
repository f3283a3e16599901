"""Reflection: cluster memories, let an agent (or an LLM) say what each cluster shows, store that as insights.

Two steps, so that no LLM is ever needed (docs/reflect.md):

    prepare  collects the scope's memories (newest first, at most 500; insights, revisions and
             superseded memories left out), clusters their stored embeddings and returns, per
             cluster, its members, the most typical one, characteristic terms and a ready prompt.
             The set of memories is kept as a session for SESSION_TTL.
    commit   takes the insights written from those prompts, checks every one against the session,
             and stores them all (or, on any error, none) as INSIGHT memories with INSIGHT_FROM
             edges to their sources, and links the memories each insight cites as used together
             (CO_ACTIVATED, hebbs/workflows/associate.py); a vault indexed from a notes folder also gets them as notes in
             ROOT/insights/.

Sessions live in the `meta` family (key reflect_session:<id>), so they survive a daemon restart
and a vault that the daemon closed and reopened in between.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import msgspec
import numpy as np
from ulid import ULID

from .. import validate
from ..errors import InvalidInput, NotFound
from ..fsutil import atomic_write
from ..paths import hebbs_home
from ..schema import (ClusterMember, EdgeType, Insight, InsightInput, Memory, MemoryKind, ReflectCluster,
                     ReflectCommitted, ReflectPrepared, ReflectSession)
from ..core.open_vault import HasVault, OpenVault, vault_of
from ..store.storage import WriteSet, decode, decode_vector
from ..timefmt import utc_text
from . import associate



class Rememberer(HasVault, Protocol):
    """What commit drives: the open vault, and remember_many() to store the insights (the Engine)."""

    def remember_many(self, items: Any, *, check_contradictions: bool | None = None) -> list[Memory]: ...

MIN_MEMORIES = 5
MAX_MEMORIES = 500
MAX_CLUSTERS = 50
MIN_CLUSTER_SIZE = 3
SESSION_TTL_US = 10 * 60 * 1_000_000
PROMPT_BUDGET = 4000
# A member longer than this is cut in prompts: one long note must not crowd out the rest of its cluster.
MEMBER_CHARS = 1200
TERMS = 8
SEED = 0
# Below this best silhouette the memories show no cluster structure: they are treated as one cluster
# rather than split along noise. Sentence embeddings of clearly distinct topics score 0.15 and up.
MIN_SILHOUETTE = 0.05
# One remember_many chunk, so one commit is one RocksDB batch.
MAX_INSIGHTS = 256
SESSION_PREFIX = "reflect_session:"

_WORD = re.compile(r"[a-z][a-z0-9]*(?:[-'][a-z0-9]+)*")


def _now() -> int:
    return time.time_ns() // 1000


# Prepare -------------------------------------------------------------------------------------

def prepare(engine: OpenVault | HasVault, *, entity_id: str | None = None, since: Any = None,
            max_memories: int = MAX_MEMORIES, now: int | None = None) -> ReflectPrepared:
    entity_id = validate.entity(entity_id)
    since_us = validate.timestamp_us(since, "since")
    if isinstance(max_memories, bool) or not isinstance(max_memories, int) \
            or not MIN_MEMORIES <= max_memories <= MAX_MEMORIES:
        raise InvalidInput(f"max_memories must be an integer from {MIN_MEMORIES} to {MAX_MEMORIES}, "
                           f"got {max_memories!r}")
    now = _now() if now is None else now
    memories, vectors = _collect(engine, entity_id, since_us, max_memories)
    if len(memories) < MIN_MEMORIES:
        scope = f"entity {entity_id!r}" if entity_id else "this vault"
        raise InvalidInput(f"reflect needs at least {MIN_MEMORIES} memories to find patterns in; {scope} has "
                           f"{len(memories)} (insights, revisions and superseded memories do not count)")
    labels, silhouette = cluster_vectors(vectors)
    groups = _groups(labels, memories)
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    kept = [g for g in groups if len(g) >= MIN_CLUSTER_SIZE]
    loose = sorted(i for g in groups if len(g) < MIN_CLUSTER_SIZE for i in g)
    terms = characteristic_terms([[memories[i].content for i in g] for g in kept]
                                 + [[memories[i].content for i in loose]])[:len(kept)]
    clusters: list[ReflectCluster] = []
    for n, group in enumerate(kept):
        centroid = unit[group].mean(axis=0)
        centroid /= max(float(np.linalg.norm(centroid)), 1e-12)
        centrality = unit[group] @ centroid
        members = [_member(memories[i], float(c)) for i, c in zip(group, centrality)]
        clusters.append(_cluster(engine, n + 1, len(kept), members, terms[n], entity_id))
    session = ReflectSession(id=str(ULID()), created_at=now, expires_at=now + SESSION_TTL_US,
                             memory_ids=[m.id for m in memories], entity_id=entity_id)
    _save_session(engine, session, now)
    return ReflectPrepared(
        session_id=session.id, expires_at=session.expires_at, clusters=clusters,
        unclustered=[_member(memories[i], 0.0) for i in loose], memory_count=len(memories),
        silhouette=None if silhouette is None else round(silhouette, 4))


def _collect(engine: OpenVault | HasVault, entity_id: str | None, since: int | None,
             limit: int) -> tuple[list[Memory], np.ndarray]:
    """The scope's newest memories with their stored vectors (a memory without one is skipped)."""
    # A copy: a concurrent remember may grow the catalog while this runs.
    ranked = sorted(((e.created_at, mid) for mid, e in vault_of(engine).entries()
                     if e.kind == MemoryKind.EPISODE and e.superseded_by is None
                     and (entity_id is None or e.entity_id == entity_id)
                     and (since is None or e.created_at >= since)), reverse=True)
    memories: list[Memory] = []
    rows: list[np.ndarray] = []
    for _, mid in ranked:
        memory = vault_of(engine).store.get_memory(mid)
        raw = vault_of(engine).store.get_vector(mid)
        if memory is None or raw is None:
            continue
        memories.append(memory)
        rows.append(decode_vector(raw))
        if len(memories) == limit:
            break
    dim = vault_of(engine).embedder.dim
    return memories, (np.vstack(rows).astype(np.float64) if rows else np.zeros((0, dim)))


def cluster_vectors(vectors: np.ndarray) -> tuple[np.ndarray, float | None]:
    """Labels from k-means on the unit sphere, k chosen by cosine silhouette; (labels, best silhouette).

    scikit-learn's KMeans on normalized rows: Euclidean distance between unit vectors is a function of
    their cosine, so this clusters by cosine. A fixed seed and a fixed input order make it repeatable.
    """
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score
    from threadpoolctl import threadpool_limits

    n = len(vectors)
    x = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    k_max = min(MAX_CLUSTERS, n // MIN_CLUSTER_SIZE)
    if k_max < 2:
        return np.zeros(n, dtype=np.int64), None
    distances = np.clip(1.0 - x @ x.T, 0.0, 2.0)
    np.fill_diagonal(distances, 0.0)
    # Restarts cost time in proportion: on a small vault they are cheap and one bad start would decide
    # everything; on a big one the search uses two, and the chosen k is fitted again with ten.
    search_init = 10 if n <= 120 else 2
    tried: dict[int, tuple[float, np.ndarray]] = {}

    def score_of(labels: np.ndarray) -> float:
        return float(silhouette_score(distances, labels, metric="precomputed")) if len(set(labels)) > 1 else -1.0

    def fit(k: int) -> None:
        if k in tried or not 2 <= k <= k_max:
            return
        labels = KMeans(n_clusters=k, random_state=SEED, n_init=search_init).fit(x).labels_
        tried[k] = (score_of(labels), labels)

    # KMeans parallelizes each tiny fit over OpenMP threads, which on a few hundred rows costs far
    # more than it saves (20x slower on two cores): one thread is fastest here.
    with threadpool_limits(limits=1):
        for k in _k_grid(k_max):
            fit(k)
        # Refine between the grid's neighbours of the best k.
        best = max(tried, key=lambda k: (tried[k][0], -k))
        grid = sorted(tried)
        pos = grid.index(best)
        for lo, hi in ((grid[pos - 1] if pos else best, best), (best, grid[pos + 1] if pos + 1 < len(grid) else best)):
            for k in np.unique(np.linspace(lo, hi, 5).round().astype(int)):
                fit(int(k))
        best = max(tried, key=lambda k: (tried[k][0], -k))
        score, labels = tried[best]
        if search_init < 10:
            final = KMeans(n_clusters=best, random_state=SEED, n_init=10).fit(x).labels_
            if (final_score := score_of(final)) >= score:
                score, labels = final_score, final
    if score < MIN_SILHOUETTE:
        return np.zeros(n, dtype=np.int64), score
    return np.asarray(labels, dtype=np.int64), score


def _k_grid(k_max: int) -> list[int]:
    """Every k up to 10, then steps of about 25%: silhouette moves slowly at large k."""
    ks = list(range(2, min(k_max, 10) + 1))
    k = 10
    while k < k_max:
        k = min(k_max, math.ceil(k * 1.25))
        ks.append(k)
    return ks


def _groups(labels: np.ndarray, memories: list[Memory]) -> list[list[int]]:
    """Member indices per cluster: biggest cluster first, then the one with the newest memory; members
    keep the input order (newest first), so labels never decide the order anything is shown in."""
    by_label: dict[int, list[int]] = {}
    for i, label in enumerate(labels.tolist()):
        by_label.setdefault(label, []).append(i)
    return sorted(by_label.values(), key=lambda g: (-len(g), g[0]))


def _member(memory: Memory, centrality: float) -> ClusterMember:
    return ClusterMember(id=memory.id, content=memory.content, created_at=memory.created_at,
                         importance=memory.importance, entity_id=memory.entity_id,
                         centrality=round(centrality, 4))


# Characteristic terms ------------------------------------------------------------------------

def characteristic_terms(classes: Sequence[Sequence[str]], top: int = TERMS) -> list[list[str]]:
    """Per class of texts, the words that set it apart from the other classes (class-based TF-IDF):
    tf(t, c) x log(1 + average words per class / frequency of t over all classes)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    counts = [Counter(w for text in texts for w in _words(text, ENGLISH_STOP_WORDS)) for texts in classes]
    totals = [sum(c.values()) for c in counts]
    present = [t for t in totals if t]
    if not present:
        return [[] for _ in classes]
    average = sum(present) / len(present)
    overall: Counter[str] = Counter()
    for c in counts:
        overall.update(c)
    out: list[list[str]] = []
    for c, total in zip(counts, totals):
        scored = sorted(((count / total) * math.log(1 + average / overall[word]), word)
                        for word, count in c.items()) if total else []
        scored.sort(key=lambda sw: (-sw[0], sw[1]))
        out.append([w for _, w in scored[:top]])
    return out


def _words(text: str, stop: frozenset[str]) -> list[str]:
    out = []
    for word in _WORD.findall(text.lower().replace("’", "'")):
        if word.endswith("'s"):
            word = word[:-2]
        if len(word) >= 3 and word not in stop:
            out.append(word)
    return out


# Prompts -------------------------------------------------------------------------------------

_INSTRUCTIONS = """\
Answer with JSON only, in this form:
{"insights": [{"content": "one self-contained statement", "confidence": 0.8, \
"source_memory_ids": ["<id>", "<id>"], "tags": ["short-tag"]}]}
- Propose 1 to 3 insights: patterns, lessons, preferences or stable facts that the memories show \
together and that no single one of them states. Do not summarize each memory.
- source_memory_ids: the ids (in brackets above) of the memories that support the insight; cite \
at least two where you can, and only ids listed above.
- confidence: from 0 to 1, how strongly the cited memories support the insight.
- If these memories show nothing beyond themselves, answer {"insights": []}."""


def _cluster(engine: OpenVault | HasVault, index: int, total: int, members: list[ClusterMember], terms: list[str],
             entity_id: str | None) -> ReflectCluster:
    prompt, tokens, shown = cluster_prompt(engine, members, index, total, terms, entity_id, PROMPT_BUDGET)
    return ReflectCluster(
        index=index, memories=sorted(members, key=lambda m: (-m.created_at, m.id)),
        representative_id=min(members, key=lambda m: (-m.centrality, m.id)).id, terms=terms, prompt=prompt,
        prompt_tokens=tokens, omitted=len(members) - shown)


def cluster_prompt(engine: OpenVault | HasVault, members: Sequence[ClusterMember], index: int, total: int,
                   terms: list[str], entity_id: str | None, budget: int) -> tuple[str, int, int]:
    """The prompt asking for a cluster's insights: (prompt, tokens, members shown). The most typical
    members come first, so those a tight budget leaves out are the outliers."""
    typical = sorted(members, key=lambda m: (-m.centrality, m.id))
    scope = f" about {entity_id}" if entity_id else ""
    intro = (f"Below are {len(members)} related memories{scope} from an AI agent's memory "
             f"(cluster {index} of {total}; characteristic terms: {', '.join(terms) or 'none'}).\n"
             "Read them and say what they show together.\n\nMemories, most typical first:")
    lines = [member_line(m, with_entity=entity_id is None) for m in typical]
    return render_prompt(engine, intro, lines, _INSTRUCTIONS, budget)


def member_line(member: ClusterMember | Memory, *, with_entity: bool = True) -> str:
    text = " ".join(member.content.split())
    if len(text) > MEMBER_CHARS:
        text = text[:MEMBER_CHARS - 1] + "…"
    when = utc_text(member.created_at)
    who = f", {member.entity_id}" if with_entity and member.entity_id else ""
    return f"- [{member.id}] ({when} UTC{who}, importance {member.importance:.2f}) {text}"


def render_prompt(engine: OpenVault | HasVault, intro: str, lines: Sequence[str], outro: str,
                  budget: int) -> tuple[str, int, int]:
    """intro, as many lines as fit, outro: (prompt, its tokens, lines shown). Lines are added in order
    until the next would pass the budget; a note says how many were left out.

    Every piece is counted in one tokenizer call (a call costs more than its texts). Pieces are joined
    at line breaks, where a tokenizer splits anyway, so the prompt's count is the sum of its pieces'
    counts less the special tokens ([CLS], [SEP]) that each piece's count includes once too often."""
    note = "(99999 more memories left out to fit the prompt budget.)"
    special, *counts = count_tokens(engine, ["", intro, outro, note, *lines])
    net = [max(0, c - special) for c in counts]
    used = special + net[0] + net[1] + net[2]
    shown: list[str] = []
    for line, tokens in zip(lines, net[3:]):
        if used + tokens > budget:
            break
        shown.append(line)
        used += tokens
    parts = [intro, *shown]
    if len(shown) < len(lines):
        parts.append(f"({len(lines) - len(shown)} more memories left out to fit the prompt budget.)")
    else:
        used -= net[2]
    return "\n".join(parts) + "\n\n" + outro, used, len(shown)


def count_tokens(engine: OpenVault | HasVault, texts: Sequence[str]) -> list[int]:
    """Tokens per text with the vault's own tokenizer (close to an LLM's), else words x 1.3."""
    counter = getattr(vault_of(engine).embedder, "count_tokens", None)
    if counter is not None:
        try:
            return list(counter(list(texts)))
        except Exception:  # noqa: BLE001 - a custom embedder's tokenizer is not ours to trust
            pass
    return [math.ceil(len(t.split()) * 1.3) for t in texts]


# Sessions ------------------------------------------------------------------------------------

def _session_key(session_id: str) -> bytes:
    return (SESSION_PREFIX + session_id).encode()


def _save_session(engine: OpenVault | HasVault, session: ReflectSession, now: int) -> None:
    with vault_of(engine).writing():
        writes = WriteSet()
        # Sessions nobody committed would pile up: drop the expired ones whenever a new one starts.
        for key, raw in vault_of(engine).store.scan("meta", SESSION_PREFIX.encode()):
            if decode(raw, ReflectSession).expires_at < now:
                writes.delete("meta", key)
        writes.put_meta(SESSION_PREFIX + session.id, session)
        vault_of(engine).store.commit(writes)


def load_session(engine: OpenVault | HasVault, session_id: Any, now: int) -> ReflectSession:
    if not isinstance(session_id, str) or not session_id.strip():
        raise InvalidInput(f"session_id must be the id reflect_prepare returned, got {session_id!r}")
    raw = vault_of(engine).store.get("meta", _session_key(session_id.strip().upper()))
    if raw is None:
        raise NotFound(f"no reflect session {session_id}: sessions expire {SESSION_TTL_US // 60_000_000} "
                       "minutes after reflect-prepare; run it again")
    session = decode(raw, ReflectSession)
    if session.committed_at is not None:
        raise InvalidInput(f"reflect session {session_id} was committed already; run reflect-prepare again")
    if now > session.expires_at:
        raise InvalidInput(f"reflect session {session_id} expired at {_iso(session.expires_at)} "
                           f"({SESSION_TTL_US // 60_000_000} minutes after reflect-prepare); run it again")
    return session


# Commit --------------------------------------------------------------------------------------

def parse_insights(insights: Any) -> list[InsightInput]:
    """Insights as dicts or InsightInput, checked field by field; InvalidInput names the bad one."""
    if isinstance(insights, (str, bytes, dict)) or not isinstance(insights, Sequence):
        raise InvalidInput("insights must be a list of {content, confidence, source_memory_ids, tags}")
    if not insights:
        raise InvalidInput("insights is empty: nothing to commit (an unused session simply expires)")
    if len(insights) > MAX_INSIGHTS:
        raise InvalidInput(f"at most {MAX_INSIGHTS} insights per commit, got {len(insights)}")
    out: list[InsightInput] = []
    for n, item in enumerate(insights):
        try:
            parsed = item if isinstance(item, InsightInput) else msgspec.convert(item, InsightInput)
        except msgspec.ValidationError as exc:
            raise InvalidInput(f"insight {n}: {exc}") from None
        content = validate.content(parsed.content, f"insight {n} content").strip()
        confidence = validate.unit_float(parsed.confidence, f"insight {n} confidence")
        if not parsed.source_memory_ids:
            raise InvalidInput(f"insight {n} cites no source_memory_ids; an insight rests on the memories it came from")
        sources = list(dict.fromkeys(validate.memory_id(s, f"insight {n} source") for s in parsed.source_memory_ids))
        tags = list(dict.fromkeys(t.strip() for t in parsed.tags if t.strip()))
        out.append(InsightInput(content=content, confidence=confidence, source_memory_ids=sources, tags=tags))
    return out


def commit(engine: Rememberer, session_id: str, insights: Any, *, now: int | None = None) -> ReflectCommitted:
    now = _now() if now is None else now
    parsed = parse_insights(insights)
    with vault_of(engine).writing():
        session = load_session(engine, session_id, now)
        members = set(session.memory_ids)
        for n, insight in enumerate(parsed):
            for source in insight.source_memory_ids:
                if source not in members:
                    raise InvalidInput(f"insight {n} cites {source}, which is not one of this session's memories")
                if source not in vault_of(engine):
                    raise NotFound(f"insight {n} cites {source}, which was forgotten after reflect-prepare")
        root = notes_root(engine)
        if root is not None and parsed and vault_of(engine).config.notes.write:
            notes_subdir(root, vault_of(engine).config.notes.insights_dir)  # refuse before storing anything
        sources = {mid: vault_of(engine).get(mid) for insight in parsed for mid in insight.source_memory_ids}
        items = [_insight_item(insight, [sources[s] for s in insight.source_memory_ids], session)
                 for insight in parsed]
        stored = engine.remember_many(items, check_contradictions=False)
        writes = WriteSet()
        writes.put_meta(SESSION_PREFIX + session.id, msgspec.structs.replace(session, committed_at=now))
        # The memories one insight cites were used together: linked (docs/consolidation.md).
        associate.strengthen_groups(writes, vault_of(engine).store, [i.source_memory_ids for i in parsed], now,
                                    vault_of(engine).config.decay)
        vault_of(engine).store.commit(writes)
    files: list[str] = []
    warnings: list[str] = []
    root = notes_root(engine)
    notes = vault_of(engine).config.notes
    if root is not None and notes.write:
        for memory, insight in zip(stored, parsed):
            try:
                cited = [sources[s] for s in insight.source_memory_ids]
                folder = notes_subdir(root, notes.insights_dir, create=True)
                files.append(str(write_insight_note(folder, memory, insight, cited)))
            except (OSError, InvalidInput) as exc:
                warnings.append(f"insight {memory.id} is stored, but its note could not be written: {exc}")
    return ReflectCommitted(session_id=session.id, insights=stored, files=files, warnings=warnings)


def _insight_item(insight: InsightInput, sources: list[Memory], session: ReflectSession) -> dict[str, Any]:
    entities = {m.entity_id for m in sources}
    entity = session.entity_id or (entities.pop() if len(entities) == 1 else None)
    return {
        "content": insight.content, "kind": MemoryKind.INSIGHT, "entity_id": entity,
        # An insight matters as much as the most important memory it rests on.
        "importance": max(m.importance for m in sources),
        "context": {"origin": "reflect", "confidence": insight.confidence, "tags": insight.tags,
                    "reflect_session": session.id},
        "edges": [(m.id, EdgeType.INSIGHT_FROM.name, insight.confidence) for m in sources],
    }


def load_commit_file(raw: bytes | str) -> tuple[str, list[InsightInput]]:
    """The file `hebbs reflect-commit --file` reads: {"session_id": "...", "insights": [...]}."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise InvalidInput(f"the insights file is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or "session_id" not in data or "insights" not in data:
        raise InvalidInput('the insights file must be a JSON object {"session_id": "...", "insights": [...]}')
    return str(data["session_id"]), parse_insights(data["insights"])


# Listing -------------------------------------------------------------------------------------

def list_insights(engine: OpenVault | HasVault, *, entity_id: str | None = None, min_confidence: float = 0.0,
                  max_results: int = 100) -> list[Insight]:
    entity_id = validate.entity(entity_id)
    min_confidence = validate.unit_float(min_confidence, "min_confidence")
    if isinstance(max_results, bool) or not isinstance(max_results, int) or max_results < 1:
        raise InvalidInput(f"max_results must be a positive integer, got {max_results!r}")
    ranked = sorted(((e.created_at, mid) for mid, e in vault_of(engine).entries()
                     if e.kind == MemoryKind.INSIGHT and e.superseded_by is None
                     and (entity_id is None or e.entity_id == entity_id)), reverse=True)
    out: list[Insight] = []
    for _, mid in ranked:
        memory = vault_of(engine).store.get_memory(mid)
        if memory is None:
            continue
        raw = memory.context.get("confidence")
        confidence = float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else None
        if (min_confidence > 0 and confidence is None) or (confidence is not None and confidence < min_confidence):
            continue
        tags = memory.context.get("tags")
        edges = vault_of(engine).store.edges_from(mid)
        sources = [target for kind, target, _, _ in edges if kind == EdgeType.INSIGHT_FROM]
        out.append(Insight(memory=memory, confidence=confidence, source_ids=sources,
                           tags=[str(t) for t in tags] if isinstance(tags, list) else []))
        if len(out) >= max_results:
            break
    return out


# Markdown write-back -------------------------------------------------------------------------

def notes_root(engine: OpenVault | HasVault) -> Path | None:
    """The notes folder a vault was indexed from (ROOT for ROOT/.hebbs), or None: the global vault
    (HEBBS_HOME, often ~/.hebbs too) and plain vault directories have no notes to write next to."""
    path = Path(vault_of(engine).path)
    if path.name != ".hebbs":
        return None
    try:
        if path.resolve() == hebbs_home().resolve():
            return None
    except OSError:
        return None
    return path.parent


def write_insight_note(folder: Path, memory: Memory, insight: InsightInput, sources: list[Memory]) -> Path:
    """The insight as a note in folder (ROOT/insights by default); forgetting the insight removes it."""
    lines = [
        "---",
        f"hebbs_id: {memory.id}",
        "kind: insight",
        f"confidence: {insight.confidence:g}",
        f"tags: {json.dumps(insight.tags)}",
        f"created: {_iso(memory.created_at)}",
        f"reflect_session: {memory.context.get('reflect_session', '')}",
        "---",
        "",
        f"# {_title(memory.content)}",
        "",
        memory.content.strip(),
        "",
        "## Sources",
        "",
    ]
    lines += [source_line(m) for m in sources]
    name = f"{_iso(memory.created_at)[:10]}-{slug(memory.content)}-{memory.id[-6:].lower()}.md"
    return write_note(folder / name, "\n".join(lines) + "\n")


def remove_insight_notes(engine: OpenVault | HasVault, insight_ids: list[str]) -> list[str]:
    """Delete the notes of forgotten insights (vaults of a notes folder); returns the paths removed."""
    root = notes_root(engine)
    if root is None:
        return []
    folder = root / vault_of(engine).config.notes.insights_dir
    return [str(path) for mid in insight_ids if (path := _remove_note(folder, mid)) is not None]


def _remove_note(folder: Path, memory_id: str) -> Path | None:
    """The note written for memory_id: named …-<last 6 of the id>.md, naming the id in its front matter."""
    try:
        candidates = list(folder.glob(f"*-{memory_id[-6:].lower()}.md"))
    except OSError:
        return None
    for path in candidates:
        try:
            head = path.read_text(encoding="utf-8", errors="replace")[:400]
        except OSError:
            continue
        if f"hebbs_id: {memory_id}" in head:
            path.unlink(missing_ok=True)
            return path
    return None


def source_line(memory: Memory) -> str:
    """A bullet naming a memory: its id, date and text, and a wiki-link to its note when it has one."""
    text = " ".join(memory.content.split())
    text = text if len(text) <= 160 else text[:159] + "…"
    link = wiki_link(memory)
    return f"- `{memory.id}` ({_iso(memory.created_at)[:10]}) {text}" + (f" — {link}" if link else "")


def wiki_link(memory: Memory) -> str:
    """[[file#heading]] for a memory indexed from a note (Obsidian resolves it), else ""."""
    if memory.source is None:
        return ""
    target = memory.source.file_path[:-3] if memory.source.file_path.endswith(".md") else memory.source.file_path
    if memory.source.heading_path:
        target += "#" + memory.source.heading_path[-1]
    return f"[[{target}]]"


def notes_subdir(root: Path, name: str, *, create: bool = False) -> Path:
    """root/name, checked to stay inside root once symlinks are resolved (created when asked).

    hebbs writes notes (insights, contradiction reports) only inside the notes folder: a link that
    takes the folder elsewhere is refused, as the indexer refuses to read through one.
    """
    real_root = root.resolve()
    target = (root / name).resolve()
    if target != real_root and real_root not in target.parents:
        raise InvalidInput(f"{root / name} leads outside the notes folder {root} (to {target}); hebbs writes notes "
                           f"only inside it. Replace the link with a folder, or remove it")
    if create:
        target.mkdir(parents=True, exist_ok=True)
    return root / name


def write_note(path: Path, text: str) -> Path:
    """Write atomically, so a watcher or an editor never sees half a note."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text.encode("utf-8"), mode=0o644)
    return path


def slug(text: str, words: int = 6) -> str:
    found = re.findall(r"[a-z0-9]+", text.lower())[:words]
    return "-".join(found)[:60].strip("-") or "note"


def _title(text: str, limit: int = 80) -> str:
    first = re.split(r"(?<=[.!?])\s|\n", text.strip(), maxsplit=1)[0].strip()
    return first if len(first) <= limit else first[:limit - 1] + "…"


def _iso(us: int) -> str:
    return utc_text(us, "%Y-%m-%dT%H:%M:%SZ")
