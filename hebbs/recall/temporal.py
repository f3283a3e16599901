"""Temporal recall: newest first within the entity and time range; relevance falls with rank."""

from __future__ import annotations

from ..core.open_vault import OpenVault
from .fusion import Candidate
from .query import Found, Query


def recall(vault: OpenVault, query: Query) -> Found:
    ids = vault.newest(query.entity_id, query.window, query.limit, query.allowed)
    n = max(1, len(ids))
    return {mid: Candidate(1.0 - rank / n, ["temporal"], {"temporal_rank": rank + 1})
            for rank, mid in enumerate(ids)}, []
