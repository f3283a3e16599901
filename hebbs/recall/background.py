"""Where a recall's confidence background comes from: what the cue's cosine to any memory of the vault
is (confidence.py reads `cosine_gap` as a memory's cosine above it: how far it stands out for this cue).

The background is the cue's cosine to the mean of the vault's stored vectors (the mean of its cosines
to all of them), estimated once from an even sample and again when the vault has grown or shrunk by
a tenth. It costs one dot product per recall and needs no search: an HNSW search costs what its
breadth makes it cost, and a background read from the cue's hits past its answers (ranks 10 to 49,
until issue 27) tied every recall to a search deeper than the one a raw hnswlib user makes. Measured
on bench/bench_abstention.py, the vault's mean separates answerable from unanswerable cues as well as
the deeper hits did (docs/honesty.md). So a similarity-only recall searches its answers and the
candidates confidence judges (CONSIDERED), at the index's own breadth: the search a raw
hnswlib user makes for the top 10.
"""

from __future__ import annotations

import weakref

import numpy as np

from ..core.open_vault import Filter, Hits, OpenVault, passing

# How many of a recall's best candidates (by fused relevance, before top_k cuts them) confidence.py
# judges: the answer's confidence is over these, whatever top_k is, so that `--top-k 1` and `--top-k 10`
# agree.
CONSIDERED = 10
# How many stored vectors the vault's mean is estimated from, and by what share the vault's size may
# move before it is estimated again.
SAMPLE = 2048
STALE_FRACTION = 0.1
_means: "weakref.WeakKeyDictionary[OpenVault, tuple[int, np.ndarray]]" = weakref.WeakKeyDictionary()


def nearest(vault: OpenVault, vector: np.ndarray, top_k: int, allowed: Filter) -> Hits:
    """The cue's nearest memories in scope, best first: its top_k answers and at least the CONSIDERED
    candidates confidence judges (so that top_k does not change the answer's confidence), from one
    search at the index's own breadth when enough of its hits pass the scope (a plain scope,
    nothing narrowed, drops few); otherwise OpenVault.similar widens as it does for any filter."""
    depth = max(CONSIDERED, top_k)
    ef = max(vault.config.index.ef_search, depth)
    hits = vault.similar_wide(vector, depth, ef=ef)
    kept = [hit for hit, keep in zip(hits, passing(allowed, [mid for mid, _ in hits])) if keep]
    if len(kept) >= top_k or len(hits) >= vault.indexed_count():
        return kept
    return vault.similar(vector, depth, allowed, narrow=False)


def vault_mean(vault: OpenVault) -> np.ndarray | None:
    """The mean of the vault's stored vectors (of an even sample of at most SAMPLE), kept until the
    vault's size moves by STALE_FRACTION; None for an empty vault."""
    count = vault.indexed_count()
    if count == 0:
        return None
    kept = _means.get(vault)
    if kept is not None and abs(kept[0] - count) <= STALE_FRACTION * kept[0]:
        return kept[1]
    ids = list(vault.vector_index.ids_by_label().values())
    if len(ids) > SAMPLE:
        ids = [ids[i] for i in np.linspace(0, len(ids) - 1, SAMPLE).astype(np.int64).tolist()]
    mean = vault.vector_index.vectors(ids).astype(np.float64).mean(axis=0).astype(np.float32)
    _means[vault] = (count, mean)
    return mean
