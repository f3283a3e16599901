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

    @cached_property
    def cue_vector(self) -> np.ndarray | None:
        """The cue's embedding, computed once and only if a strategy asks for it."""
        return None if self.cue is None else self.embed(self.cue)


Found = tuple[Candidates, list[str]]  # candidates and notes for the caller
Strategy = Callable[[OpenVault, Query], Found]
