"""Prime: load what an agent should know about an entity at the start of a conversation, in one call.

Two engine recalls: the entity's most recent memories (temporal) and, when there is a cue, the most
relevant to it (the default fused recall). They are interleaved, relevant first, so neither side can crowd the
other out of the budget, and a memory both found appears once with both strategies named.
Priming does not reinforce: loading context is not evidence that a memory was useful.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..errors import InvalidInput
from ..schema import RecallResult, RecallResults


class Recaller(Protocol):
    """What prime needs: the Engine's recall (prime composes two calls of it, like any caller would)."""

    def recall(self, cue: str | None = None, **options: Any) -> RecallResults: ...

MAX_PRIME = 1000


def prime(engine: Recaller, entity_id: str | None, similarity_cue: str | None = None,
          max_memories: int = 20, now: Any = None, origin: dict[str, str | None] | None = None) -> RecallResults:
    """The entity's most recent memories plus the most relevant to the cue (None: across every entity);
    `now` is the reference time for the cue's time words and for recency; `origin` (author, agent, session)
    narrows both recalls to the memories stored by them."""
    origin = origin or {}
    if isinstance(max_memories, bool) or not isinstance(max_memories, int) or not 1 <= max_memories <= MAX_PRIME:
        raise InvalidInput(f"max_memories must be an integer from 1 to {MAX_PRIME}, got {max_memories!r}")
    recent = engine.recall(None, strategies=["temporal"], top_k=max_memories, entity_id=entity_id,
                           reinforce=False, now=now, **origin).results
    relevant: list[RecallResult] = []
    judged = RecallResults()
    if similarity_cue is not None:
        # The default (lexical + dense fused) recall: a cue naming an identifier must find it here too.
        judged = engine.recall(similarity_cue, top_k=max_memories, entity_id=entity_id, reinforce=False,
                               now=now, **origin)
        relevant = judged.results
    picked: dict[str, RecallResult] = {}
    for pair in _interleave(relevant, recent):
        have = picked.get(pair.memory.id)
        if have is not None:
            have.strategies.extend(s for s in pair.strategies if s not in have.strategies)
            have.details.update(pair.details)
            have.score = max(have.score, pair.score)
            if pair.confidence is not None:
                have.confidence = max(have.confidence or 0.0, pair.confidence)
            continue
        if len(picked) < max_memories:
            picked[pair.memory.id] = pair
    found = f"{len(recent)} recent" + (f", {len(relevant)} relevant to the cue" if similarity_cue is not None else "")
    notes = [f"{found}, {len(picked)} after deduplication"] + judged.notes
    # Whether the cue found anything relevant is the relevant recall's verdict; recent memories are
    # loaded whatever it is.
    return RecallResults(results=sorted(picked.values(), key=lambda r: r.score, reverse=True), notes=notes,
                         time_understood=judged.time_understood, abstained=judged.abstained,
                         confidence=judged.confidence, threshold=judged.threshold)


def _interleave(first: list[RecallResult], second: list[RecallResult]) -> list[RecallResult]:
    out: list[RecallResult] = []
    for i in range(max(len(first), len(second))):
        if i < len(first):
            out.append(first[i])
        if i < len(second):
            out.append(second[i])
    return out
