"""What every recall strategy receives: the vault-independent half of one recall call."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..config import RecallConfig
from ..schema import Memory
from ..embedding.embed import Embedder
from ..core.open_vault import Filter, OpenVault
from . import background
from .fusion import Candidates


@dataclass
class Query:
    cue: str | None
    embed: Callable[[str], np.ndarray] = field(repr=False)
    allowed: Filter = field(repr=False)
    limit: int  # how many candidates each strategy returns
    settings: RecallConfig
    entity_id: str | None = None
    window: tuple[int, int] | None = None
    seed: str | None = None
    direction: str = "forward"
    max_depth: int = 5
    edge_types: Sequence[str] | None = None
    alpha: float | None = None
    analogy: Sequence[str] | None = None
    # Similarity alone: how many answers it returns. Its search is then the one a raw hnswlib user
    # makes for them (background.nearest).
    answers: int | None = None
    _cue_hits: list[tuple[str, float]] | None = field(default=None, init=False, repr=False)
    # Stored vectors read during this recall, by memory id: neighbour support, MMR and confidence
    # look at overlapping memories, and each is read from RocksDB once (a copy made by
    # dataclasses.replace, the time-word pass, shares it).
    vectors: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    # The cue's cosine to each memory its vector searches found, by memory id (shared the same way):
    # confidence reads them instead of the stored vectors.
    cosines: dict[str, float] = field(default_factory=dict, repr=False)
    # The records read during this recall, by memory id (shared the same way): lexical feedback,
    # ranking and confidence read overlapping memories, each decoded once.
    memories: dict[str, Memory | None] = field(default_factory=dict, repr=False)

    @property
    def filtered(self) -> bool:
        """An entity, time or origin filter: few memories pass it, so searches oversample more."""
        return self.entity_id is not None or self.window is not None or getattr(self.allowed, "narrowed", False)

    @cached_property
    def cue_vector(self) -> np.ndarray | None:
        """The cue's embedding, computed once and only if a strategy asks for it."""
        return None if self.cue is None else self.embed(self.cue)

    @property
    def embedding_pending(self) -> bool:
        """Whether reading cue_vector embeds the cue now (it was neither computed nor given)."""
        return self.cue is not None and "cue_vector" not in self.__dict__

    def cue_hits(self, vault: OpenVault) -> list[tuple[str, float]]:
        """The cue's `limit` nearest memories in scope, searched once per recall: the similarity and
        fused strategies and the confidence background all read the same hits."""
        if self._cue_hits is None:
            if self.answers is not None and not self.filtered:
                self._cue_hits = background.nearest(vault, self.cue_vector, self.answers, self.allowed)
            else:
                self._cue_hits = vault.similar(self.cue_vector, self.limit, self.allowed, narrow=self.filtered)
            self.cosines.update(self._cue_hits)
        return self._cue_hits

    def stored_vectors(self, vault: OpenVault, ids: list[str]) -> np.ndarray:
        """These memories' stored vectors, one row each (zeros for one without), read at most once per recall."""
        return cached_vectors(vault, self.vectors, ids)


def cached_memories(vault: OpenVault, cache: dict[str, Memory | None], ids: list[str]) -> list[Memory | None]:
    """These memories (None for one that does not exist), those not in `cache` read in one multi-get and kept in it."""
    missing = [mid for mid in ids if mid not in cache]
    if missing:
        cache.update(zip(missing, vault.memories_of(missing)))
    return [cache[mid] for mid in ids]


def cached_vectors(vault: OpenVault, cache: dict[str, np.ndarray], ids: list[str]) -> np.ndarray:
    """Rows of `cache` for `ids`, the missing ones first read in one multi-get and kept in it."""
    missing = [mid for mid in ids if mid not in cache]
    if missing:
        read = vault.vectors_or_zeros(missing)
        cache.update(zip(missing, read))
        if len(missing) == len(ids):
            return read.copy()  # read in this order already (a copy: the cache holds views of it)
    if not ids:
        return np.zeros((0, vault.embedder.dim), dtype=np.float32)
    return np.array([cache[mid] for mid in ids])  # np.stack's result, a fraction of its overhead


# A sentence ends at . ? or ! followed by space and what starts a sentence: "e.g. this" and "v2.3" stay whole.
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+(?=[A-Z\"'(])")


def _sentences(cue: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(cue.strip()) if s.strip()]


def cue_embedding(embedder: Embedder, cue: str, by_sentence: bool = True) -> np.ndarray:
    """The cue's embedding; with by_sentence, a cue of several sentences is embedded as the mean of
    its sentences' embeddings (normalized): a paragraph that asks several things is then searched for
    each of them, where one embedding of the whole blurs them and the model reads only its start."""
    sentences = _sentences(cue) if by_sentence else []
    if len(sentences) < 2:
        return embedder.embed_query(cue)
    mean = embedder.embed_queries(sentences).mean(axis=0)
    norm = float(np.linalg.norm(mean))
    return (mean / norm).astype(np.float32) if norm > 0 else embedder.embed_query(cue)


class CueEmbedder:
    """Query.embed for one recall: cue_embedding, except that when the recall will also embed a second
    text of the cue's (`also`: the cue less its unseen words, which confidence asks for when a
    candidate would answer, confidence.CueReading.rest_to_embed) both are embedded at once, in the
    session a single cue uses (Embedder.embed_queries_at_once). On a float32 graph that is one run:
    for a dozen tokens a run costs mostly its fixed part, and the pair cost about 1.4x one cue where a
    second run through the batch session cost 2x, on the ~4% of cues that need it (LoCoMo questions
    over bench_e2e's vault), which made them similarity-only recall's p99. The int8 cue graph runs
    them one after the other (each run scales its activations by its own range)."""

    def __init__(self, embedder: Embedder, by_sentence: bool, cue: str | None = None, also: str | None = None):
        self.embedder, self.by_sentence = embedder, by_sentence
        self._pair = None if cue is None or also is None or (by_sentence and (
            len(_sentences(cue)) > 1 or len(_sentences(also)) > 1)) else (cue, also)
        self._done: dict[str, np.ndarray] = {}

    def __call__(self, text: str) -> np.ndarray:
        done = self._done.pop(text, None)
        if done is not None:
            return done
        together = getattr(self.embedder, "embed_queries_at_once", None)
        if self._pair is not None and text == self._pair[0] and together is not None:
            vectors = together(list(self._pair))
            self._done[self._pair[1]] = vectors[1]
            self._pair = None
            return vectors[0]
        return cue_embedding(self.embedder, text, self.by_sentence)


Found = tuple[Candidates, list[str]]  # candidates and notes for the caller
Strategy = Callable[[OpenVault, Query], Found]
