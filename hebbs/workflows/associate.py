"""Association by use (Hebbian): memories used together strengthen a CO_ACTIVATED edge between them.

Each use moves the weight a step toward 1 (w <- 1 - (1 - w)(1 - STEP)), after decaying the old weight
with the vault's default half-life since its last use, so the weight stays in 0..1 and a link that
is not used again fades like the memories themselves. Edges are written both ways, in the caller's
batch. Recall reads them in hebbs/recall/associative.py (docs/consolidation.md).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from hebbs.config import DecayConfig
from hebbs.schema import EdgeType
from hebbs.store.contract import RecordStore
from hebbs.store.storage import WriteSet

STEP = 0.5
# A call naming many memories links each pair: bound the pairs one call can write.
MAX_IDS = 16
_US_PER_DAY = 86_400 * 1_000_000


def decayed(weight: float, last_used: int, now: int, decay: DecayConfig) -> float:
    age_days = max(0, now - last_used) / _US_PER_DAY
    return weight * 0.5 ** (age_days / decay.default_half_life_days)


def weights_from(store: RecordStore, memory_id: str, now: int, decay: DecayConfig) -> dict[str, float]:
    """This memory's co-activation partners and their weights, decayed to `now`."""
    return {other: decayed(w, at, now, decay) for edge_type, other, w, at in store.edges_from(memory_id)
            if edge_type == EdgeType.CO_ACTIVATED}


def strengthen(writes: WriteSet, store: RecordStore, ids: Sequence[str], now: int, decay: DecayConfig) -> int:
    """Link every pair of `ids` (the first MAX_IDS); returns how many pairs were strengthened."""
    return strengthen_groups(writes, store, [ids], now, decay)


def strengthen_groups(writes: WriteSet, store: RecordStore, groups: Sequence[Sequence[str]], now: int,
                      decay: DecayConfig) -> int:
    """Link every pair within each group (the first MAX_IDS of each), as one use: a pair found in
    several groups of one call is strengthened once (the old weight is read from the store, which
    this batch has not reached yet). Returns how many pairs were strengthened."""
    pairs: dict[frozenset[str], tuple[str, str]] = {}
    for ids in groups:
        for a, b in itertools.combinations(list(dict.fromkeys(ids))[:MAX_IDS], 2):
            pairs.setdefault(frozenset((a, b)), (a, b))
    for a, b in pairs.values():
        old = weights_from(store, a, now, decay).get(b, 0.0)
        weight = 1.0 - (1.0 - old) * (1.0 - STEP)
        writes.put_edge(a, EdgeType.CO_ACTIVATED, b, weight, now)
        writes.put_edge(b, EdgeType.CO_ACTIVATED, a, weight, now)
    return len(pairs)
