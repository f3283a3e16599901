"""What every recall strategy receives: the vault-independent half of one recall call."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..config import RecallConfig
from ..store.open_vault import Filter, OpenVault
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
    _cue_hits: list[tuple[str, float]] | None = field(default=None, init=False, repr=False)

    @property
    def filtered(self) -> bool:
        """An entity or time filter: few memories pass it, so searches oversample more."""
        return self.entity_id is not None or self.window is not None

    @cached_property
    def cue_vector(self) -> np.ndarray | None:
        """The cue's embedding, computed once and only if a strategy asks for it."""
        return None if self.cue is None else self.embed(self.cue)

    def cue_hits(self, vault: OpenVault) -> list[tuple[str, float]]:
        """The cue's `limit` nearest memories in scope, searched once per recall: the similarity and
        fused strategies and the confidence background all read the same hits."""
        if self._cue_hits is None:
            self._cue_hits = vault.similar(self.cue_vector, self.limit, self.allowed, narrow=self.filtered)
        return self._cue_hits


Found = tuple[Candidates, list[str]]  # candidates and notes for the caller
Strategy = Callable[[OpenVault, Query], Found]
