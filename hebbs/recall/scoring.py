"""The composite score and the factors behind it: relevance, recency, importance, reinforcement.

    score = w_relevance*relevance + w_recency*recency + w_importance*importance + w_reinforcement*reinforcement

Every factor lies in 0..1 so the weights mean what they say. Relevance comes from the recall strategy
(each strategy in this package); the other three come from the memory itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Protocol

from .. import validate
from ..config import DecayConfig
from ..errors import InvalidInput
from ..schema import ScoreComponents, ScoringWeights

US_PER_DAY = 86_400 * 1_000_000
RECENCY_WINDOW_DAYS = 30.0
REINFORCEMENT_CAP = 100


def check_weights(weights: ScoringWeights | Mapping[str, float] | Sequence[float]) -> ScoringWeights:
    """The weights, checked; a mapping of some of them (the others keep their defaults) or four
    numbers (relevance, recency, importance, reinforcement) become a ScoringWeights, as the client does."""
    weights = validate.scoring_weights(weights)
    values = (weights.relevance, weights.recency, weights.importance, weights.reinforcement)
    if any(not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0 for v in values):
        raise InvalidInput(f"scoring weights must be finite numbers >= 0, got {weights}")
    if sum(values) == 0:
        raise InvalidInput("at least one scoring weight must be above 0")
    return weights


def recency(created_at_us: int, now_us: int, window_days: float = RECENCY_WINDOW_DAYS) -> float:
    """Falls linearly from 1 (now) to 0 (window_days old); a future time counts as now."""
    age_days = max(0, now_us - created_at_us) / US_PER_DAY
    return max(0.0, 1.0 - age_days / window_days)


def time_match(created_at_us: int, about: tuple[int, int]) -> float:
    """Recency when the cue names a time (recall/timewords.py): 1 for a memory created within the
    range `about` (start, end, microseconds, inclusive), 0 for any other. The named time takes the
    place of now, so the memory from then is the fresh one, and the preference stays inside the four
    components: a score is the weights times the components, never above 1. A step, not a slope: a
    slope away from the range lifted near misses over the memory asked for (docs/recall.md)."""
    return 1.0 if about[0] <= created_at_us <= about[1] else 0.0


def recency_window_days(kind: str | None, setting: float | str, decay: DecayConfig,
                        untyped_days: float | None = None) -> float:
    """The recency window of a memory of this context type: its type's decay half-life, or one flat
    window. A memory whose type has no half-life of its own gets `untyped_days` (recall's
    untyped_recency_days) when given, else the decay default.

    A type meant to outlast a plain episode (its half-life at least decay.default_half_life_days: a
    fact, a preference, a rule) never gets a shorter window than an untyped memory: typing a memory
    `fact`, as the agent skill asks, made it rank below the same memory untyped after a few months.
    Short-lived types (a task, a status) keep their half-life, and fade within days."""
    if setting != "half_life":
        return float(setting)
    untyped = float(decay.default_half_life_days) if untyped_days is None else float(untyped_days)
    typed = decay.typed_half_life(kind)
    if typed is None:
        return untyped
    return max(typed, untyped) if typed >= decay.default_half_life_days else typed


def reinforcement(access_count: int, cap: int = REINFORCEMENT_CAP) -> float:
    return min(1.0, math.log2(1 + max(0, access_count)) / math.log2(1 + cap))


class Scorable(Protocol):
    """A Memory, or the engine's in-memory summary of one."""

    created_at: int
    importance: float
    access_count: int


def components(memory: Scorable, relevance: float, now_us: int,
               window_days: float = RECENCY_WINDOW_DAYS) -> ScoreComponents:
    return ScoreComponents(
        relevance=min(1.0, max(0.0, relevance)),
        recency=recency(memory.created_at, now_us, window_days),
        importance=memory.importance,
        reinforcement=reinforcement(memory.access_count),
    )


def composite(parts: ScoreComponents, weights: ScoringWeights) -> float:
    return (weights.relevance * parts.relevance + weights.recency * parts.recency
            + weights.importance * parts.importance + weights.reinforcement * parts.reinforcement)


Factors = tuple[float, float, float, float]  # relevance, recency, importance, reinforcement


def composite_many(candidates: Sequence[tuple[float, int, float, int, float]], now_us: int,
                   weights: ScoringWeights, about: tuple[int, int] | None = None) -> list[tuple[float, Factors]]:
    """components() and composite() of many candidates at once, each given as (relevance, created_at,
    importance, access_count, recency window in days): the same arithmetic in the same order, so the
    same floats, without a ScoreComponents per candidate (recall builds those for its results only).
    With `about` (the time range a cue names), recency is time_match() with it instead."""
    w_relevance, w_recency, w_importance, w_reinforcement = (weights.relevance, weights.recency, weights.importance,
                                                             weights.reinforcement)
    reinforcements: dict[int, float] = {}  # by access count: most candidates share a few values
    out = []
    for relevance, created_at, importance, access_count, window_days in candidates:
        relevance = min(1.0, max(0.0, relevance))
        if about is None:
            recent = max(0.0, 1.0 - (max(0, now_us - created_at) / US_PER_DAY) / window_days)
        else:
            recent = time_match(created_at, about)
        reinforced = reinforcements.get(access_count)
        if reinforced is None:
            reinforced = reinforcements[access_count] = reinforcement(access_count)
        score = (w_relevance * relevance + w_recency * recent + w_importance * importance
                 + w_reinforcement * reinforced)
        out.append((score, (relevance, recent, importance, reinforced)))
    return out


def decay_score(importance: float, last_accessed_us: int, access_count: int, now_us: int,
                half_life_days: float, cap: int = REINFORCEMENT_CAP) -> float:
    """importance * 2^(-age/half_life) * (1 + reinforcement): how alive a memory still is."""
    age_days = max(0, now_us - last_accessed_us) / US_PER_DAY
    return importance * 2.0 ** (-age_days / half_life_days) * (1.0 + reinforcement(access_count, cap))
