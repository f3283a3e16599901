"""Recall strategies by name. A strategy is a module with `recall(vault, query) -> (candidates, notes)`;
registering it here is all the engine needs (docs/architecture.md, "Adding a strategy").

The order is the order the engine merges their candidates in, so a memory found by several lists
its strategies in this order.
"""

from __future__ import annotations

from . import analogical, associative, causal, fused, lexical, similarity, temporal
from .query import Strategy

REGISTRY: dict[str, Strategy] = {
    "fused": fused.recall,  # the default for a cue; not asked for by name
    "similarity": similarity.recall,
    "lexical": lexical.recall,
    "temporal": temporal.recall,
    "causal": causal.recall,
    "analogical": analogical.recall,
    "associative": associative.recall,  # with `associate=True`, or asked for by name
}

# What callers may name in `strategies=[...]`.
STRATEGIES = tuple(name for name in REGISTRY if name != "fused")
