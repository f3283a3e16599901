"""hebbs: a local-first memory engine for AI agents.

    from hebbs import Engine, ScoringWeights
    with Engine.open("~/.hebbs") as eng:
        eng.remember("Acme uses Salesforce", importance=0.7, entity_id="acme_corp")
        for r in eng.recall("what CRM do they use"):
            print(r.score, r.memory.content)

Names load lazily: `hebbs.cli` and `hebbs.client` import this package, and a CLI call must not pay
for numpy, onnxruntime and hnswlib when only the daemon needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Engine": "engine",
    "Client": "client", "AsyncClient": "client",
    "ScoringWeights": "schema", "Memory": "schema", "MemoryKind": "schema", "Edge": "schema", "EdgeType": "schema",
    "Source": "schema", "RecallResult": "schema", "RecallResults": "schema", "ScoreComponents": "schema",
    "TimeUnderstood": "schema",
    "PendingContradiction": "schema", "InsightInput": "schema", "ContradictionVerdict": "schema",
    "Insight": "schema", "VaultStats": "schema", "QueryLogEntry": "schema",
    "HebbsError": "errors", "InvalidInput": "errors", "KeyReused": "errors", "NotFound": "errors", "VaultBusy": "errors",
    "VaultNotInitialized": "errors", "ModelMismatch": "errors", "CorruptVault": "errors", "DiskFull": "errors",
    "LLMNotConfigured": "errors", "LLMError": "errors", "Cancelled": "errors", "DaemonUnavailable": "errors",
    "StoreUnavailable": "errors", "AccessDenied": "errors", "Conflict": "errors",
    "doctor": "core.doctor", "DoctorReport": "core.doctor",
}
__all__ = list(_EXPORTS)


def version() -> str:
    """The installed package's version ("0+unknown" when run from a bare source tree)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("hebbs")
    except PackageNotFoundError:
        return "0+unknown"


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | {"__version__"})


def __getattr__(name: str) -> Any:
    if name == "__version__":
        return version()
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'hebbs' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from .client import AsyncClient, Client
    from .core.doctor import DoctorReport, doctor
    from .engine import Engine
    from .errors import (AccessDenied, Cancelled, Conflict, CorruptVault, DaemonUnavailable, HebbsError, InvalidInput,
                         KeyReused, LLMError, LLMNotConfigured, ModelMismatch, NotFound, StoreUnavailable, VaultBusy,
                         VaultNotInitialized)
    from .schema import (ContradictionVerdict, Edge, EdgeType, Insight, InsightInput, Memory, MemoryKind,
                         PendingContradiction, QueryLogEntry, RecallResult, RecallResults, ScoreComponents,
                         ScoringWeights, Source, TimeUnderstood, VaultStats)
