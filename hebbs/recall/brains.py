"""Both brains at once: one recall (or prime) over several vaults, merged into one ranked list.

Each vault runs the same recall; the merge then makes the scores comparable before it orders them.
Recency, importance and reinforcement are properties of a memory, the same whichever vault holds
it. Relevance is not: the fused relevance is normalized per query *within a vault* (its best hit
gets 1), so the best hit of a vault that knows nothing about the cue would rank with the best hit
of one that does. The merge therefore rescales relevance by a key that means the same in every vault:

- With a cue, a vault's relevances are multiplied by (its best match / the best match of all the
  vaults), where a match is the result's `confidence` when recall gives one (issue 11), else the
  cosine similarity between cue and memory (`details["similarity"]`: the same model embeds both
  vaults). The vault with the best match keeps its scores exactly; a vault whose best match is half
  as close counts half as relevant. A vault none of whose results has a match (lexical or temporal
  recall alone) is not rescaled. Results that lexical search alone found have no similarity; computing
  it for them cost ~350 ms a recall and changed nothing measurable (bench/bench_brains.py).
- A result found only as a recent memory (no cue, or prime's recent half) gets its relevance
  recomputed on the merged timeline, newest first, as one vault holding both would compute it.

The composite score is then recomputed from the adjusted components with the call's weights, so
every merged score is that formula on comparable parts. Ties go to the brain asked first (the
project), then to the newer memory. The vault's own relevance and score stay in `details`
(`vault_relevance`, `vault_score`), and each result names its brain (`vault`) and `vault_path`.

Prime gives each brain an equal share of its budget (the lists are interleaved, as prime itself
interleaves recent and relevant memories), then orders the picked memories by the merged score:
who the user is and what the project is are both context, and neither may crowd out the other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..schema import RecallResult, RecallResults, ScoreComponents, ScoringWeights
from .scoring import composite

PROJECT, GLOBAL = "project", "global"
BRAINS = (PROJECT, GLOBAL)


@dataclass
class VaultRecall:
    """One vault's answer to the shared recall."""

    label: str  # PROJECT or GLOBAL
    path: str
    found: RecallResults


def merge_recall(answers: Sequence[VaultRecall], weights: ScoringWeights, top_k: int) -> RecallResults:
    """The answers of every vault as one list of top_k, by the comparable score."""
    results = _comparable(answers, weights)
    results.sort(key=_order(answers))
    return _merged(answers, results[:top_k], "recall")


def merge_prime(answers: Sequence[VaultRecall], weights: ScoringWeights, max_memories: int) -> RecallResults:
    """Each vault's prime list interleaved (equal shares of max_memories), then ordered by the comparable score."""
    originals = [r for answer in answers for r in answer.found.results]
    rescored = {id(old): new for old, new in zip(originals, _comparable(answers, weights))}
    picked: list[RecallResult] = []
    lists = [a.found.results for a in answers]
    for rank in range(max((len(items) for items in lists), default=0)):
        for items in lists:
            if rank < len(items) and len(picked) < max_memories:
                picked.append(rescored[id(items[rank])])
    picked.sort(key=_order(answers))
    return _merged(answers, picked, "prime")


def _match(result: RecallResult) -> float | None:
    """How well a result matches the cue, on a scale every vault shares."""
    if result.confidence is not None:
        return result.confidence
    similarity = result.details.get("similarity")
    return float(similarity) if isinstance(similarity, (int, float)) else None


def _comparable(answers: Sequence[VaultRecall], weights: ScoringWeights) -> list[RecallResult]:
    """Every result (vault by vault, in order) with its vault label and a relevance and score comparable across the vaults."""
    best = {}
    for answer in answers:
        matches = [m for m in map(_match, answer.found.results) if m is not None]
        best[answer.path] = max(0.0, max(matches)) if matches else None
    known = [b for b in best.values() if b is not None]
    top = max(known, default=0.0)
    timeline = _timeline(answers)
    out: list[RecallResult] = []
    for answer in answers:
        factor = best[answer.path] / top if top > 0 and best[answer.path] is not None else 1.0
        for result in answer.found.results:
            own = result.components.relevance
            relevance = timeline[id(result)] if id(result) in timeline else own * factor
            parts = ScoreComponents(relevance=min(1.0, max(0.0, relevance)), recency=result.components.recency,
                                    importance=result.components.importance,
                                    reinforcement=result.components.reinforcement)
            details = dict(result.details)
            details["vault_relevance"] = round(own, 6)
            details["vault_score"] = round(result.score, 6)
            score = composite(parts, weights)
            out.append(RecallResult(memory=result.memory, score=score, components=parts,
                                    strategies=list(result.strategies), details=details,
                                    **_carry(result), vault=answer.label, vault_path=answer.path))
    return out


def _carry(result: RecallResult) -> dict[str, Any]:
    """The fields the merge does not change (confidence, and any added later) pass through."""
    own = {"memory", "score", "components", "strategies", "details", "vault", "vault_path"}
    return {name: getattr(result, name) for name in result.__struct_fields__ if name not in own}


def _timeline(answers: Sequence[VaultRecall]) -> dict[int, float]:
    """Relevance of results found only as recent memories, recomputed as one vault holding every vault's
    memories would: 1 - rank/n.

    Each vault gave its own `1 - rank/n_vault`; n_vault (the candidates it ranked, more than it
    returned) is read back from a result's rank and relevance, and the merged n is their sum.
    """
    total = 0
    timed: list[RecallResult] = []
    for answer in answers:
        size = 0
        for result in answer.found.results:
            rank = result.details.get("temporal_rank")
            if not isinstance(rank, int) or result.strategies != ["temporal"]:
                continue
            timed.append(result)
            relevance = result.components.relevance
            size = max(size, rank, round((rank - 1) / (1.0 - relevance)) if relevance < 1.0 else rank)
        total += size
    timed.sort(key=lambda r: r.memory.created_at, reverse=True)
    n = max(1, total)
    return {id(result): 1.0 - rank / n for rank, result in enumerate(timed)}


def _order(answers: Sequence[VaultRecall]) -> Callable[[RecallResult], tuple[float, int, int, str]]:
    position = {answer.label: i for i, answer in enumerate(answers)}
    return lambda r: (-r.score, position.get(r.vault, 0), -r.memory.created_at, r.memory.id)


def _merged(answers: Sequence[VaultRecall], results: list[RecallResult], what: str) -> RecallResults:
    counts = ", ".join(f"{a.label} {sum(r.vault_path == a.path for r in results)} of {len(a.found.results)}"
                       for a in answers)
    notes = [f"{what} over {len(answers)} vaults ({counts}); scores made comparable across them"]
    notes += [f"{a.label}: {note}" for a in answers for note in a.found.notes]
    # Nothing relevant is known only when no brain knows anything relevant; the best confidence is
    # the best of any brain, held against that brain's threshold.
    sure = max((a.found for a in answers if a.found.confidence is not None), key=lambda f: f.confidence or 0.0,
               default=None)
    # One cue and one reference time for every vault: each read the cue's time words the same way.
    understood = next((a.found.time_understood for a in answers if a.found.time_understood is not None), None)
    return RecallResults(results=results, notes=notes, abstained=all(a.found.abstained for a in answers),
                         confidence=None if sure is None else sure.confidence,
                         threshold=None if sure is None else sure.threshold, time_understood=understood)
