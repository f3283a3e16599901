"""Where a recall's confidence background comes from: the cue's similarity to the memories of its
scope that are not its answers (confidence.py reads it as `cosine_gap`: how far an answer stands out).

The background is the cue's hits ranked past the answers (confidence.background_of: ranks 10 to 49).
An HNSW search costs what its breadth (ef) makes it cost, not what it returns: at the index's own ef,
50 nearest memories cost what the 10 nearest do (bench/bench_e2e.py, issue 28). So a similarity-only
recall reads its answers and its background from one search at the index's ef, exactly the search a
raw hnswlib user makes for the top 10: the background costs no deeper search. Default recall reads
the same hits from the deeper search that fusion makes for its own sake (OpenVault.similar's margin).
"""

from __future__ import annotations

import numpy as np

from ..store.open_vault import Filter, Hits, OpenVault, passing

# How many of the cue's nearest memories a similarity-only recall reads: its answers and, past them,
# its background (ranks 10..49: confidence.BACKGROUND_FROM_RANK onward).
DEPTH = 50


def nearest_with_background(vault: OpenVault, vector: np.ndarray, top_k: int, allowed: Filter) -> Hits:
    """The cue's nearest memories in scope, best first: at least its top_k answers when the scope
    holds them, and up to max(DEPTH, top_k) in all, from one search at the index's own breadth when
    enough of its hits pass the scope (a plain scope, nothing narrowed, drops few); otherwise
    OpenVault.similar widens as it does for any filter."""
    depth = max(DEPTH, top_k)
    ef = max(vault.config.index.ef_search, depth)
    hits = vault.similar_wide(vector, depth, ef=ef)
    kept = [hit for hit, keep in zip(hits, passing(allowed, [mid for mid, _ in hits])) if keep]
    if len(kept) >= top_k or len(hits) >= vault.indexed_count():
        return kept
    return vault.similar(vector, depth, allowed, narrow=False)
