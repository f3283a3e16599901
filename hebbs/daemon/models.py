"""The embedding models a daemon keeps warm: one per model its open vaults use, within a memory budget.

A vault is embedded with one model (it records which: core/open_vault.py), and vaults of different models
are served at once. Each model loads once (embed.get_embedder) and is counted against the budget
(`[daemon] model_memory_mb`, $HEBBS_MODEL_MEMORY_MB, `--model-memory-mb`) at its warm size: the registry's
measured `warm_mib`, or twice its graph's size for a model given as a folder. A model no open vault uses is
unloaded when its last vault closes, except the default, which the daemon warms at start so that a first
recall does not wait for it. Opening a vault whose model would pass the budget is refused
(MODEL_BUDGET) after unloading whatever no vault uses.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from hebbs.errors import ModelBudgetExceeded
from hebbs.protocol import ModelStatus

if TYPE_CHECKING:
    from hebbs.embedding.embed import Embedder

log = logging.getLogger("hebbs.daemon")

DEFAULT_MODEL_MEMORY_MB = 3072
# A model given as a folder has no measured size: its graph's weights, prepacked once per session.
_FOLDER_FACTOR = 2


def warm_mib(spec: str | None) -> int:
    """What a warm copy of the model is counted at, in MiB."""
    from hebbs.embedding.embed import registry_entry, resolve_model

    ref = resolve_model(spec)
    entry = registry_entry(ref)
    if entry is not None:
        return int(entry.get("warm_mib", 0))
    size = sum(p.stat().st_size for p in Path(ref).glob("*.onnx"))
    return _FOLDER_FACTOR * size // (1 << 20)


class _Warm:
    def __init__(self, embedder: "Embedder", mib: int, pinned: bool) -> None:
        self.embedder = embedder
        self.mib = mib
        self.pinned = pinned
        # Each vault using it, with how many holds it has (an open vault, a reembed moving it here).
        self.vaults: dict[Path, int] = {}


class ModelPool:
    """The warm models, by model id. Thread-safe: vaults open on the daemon's worker threads."""

    def __init__(self, budget_mib: int = DEFAULT_MODEL_MEMORY_MB) -> None:
        self.budget_mib = budget_mib
        self._warm: dict[str, _Warm] = {}
        # Models being loaded now, with the MiB reserved for each.
        self._loading: dict[str, int] = {}
        self._lock = threading.Lock()

    def acquire(self, spec: str | None, vault: Path | None = None, *, pinned: bool = False) -> "Embedder":
        """The model's embedder, loaded if no vault holds it yet, counted for `vault` until release().
        A model is loaded outside the lock (EmbeddingGemma takes half a minute; status must not wait for
        it), its share of the budget reserved while it loads."""
        from hebbs.embedding.embed import get_embedder, resolve_model

        key = resolve_model(spec)
        with self._lock:
            warm = self._warm.get(key)
            if warm is not None:
                return self._held(warm, vault, pinned)
            mib = warm_mib(spec)
            self._unload_unused()
            used = sum(w.mib for w in self._warm.values()) + sum(self._loading.values())
            if used + mib > self.budget_mib and key not in self._loading:
                held = ", ".join(f"{k} ({w.mib} MiB, " + (f"{len(w.vaults)} open vaults)" if w.vaults
                                                           else "the default, warm at start)")
                                 for k, w in self._warm.items())
                raise ModelBudgetExceeded(
                    f"loading {key} ({mib} MiB warm) would pass the daemon's model memory budget of "
                    f"{self.budget_mib} MiB: {held} take {used} MiB. Close the vaults using them, or raise "
                    f"[daemon] model_memory_mb in $HEBBS_HOME/config.toml (or $HEBBS_MODEL_MEMORY_MB)")
            self._loading[key] = mib
        try:
            embedder = get_embedder(spec)  # loaded once, whoever asks first (its own lock)
        finally:
            with self._lock:
                self._loading.pop(key, None)
        with self._lock:
            warm = self._warm.get(key)
            if warm is None:
                warm = self._warm[key] = _Warm(embedder, mib, pinned)
                log.info("model %s loaded (%d MiB of the %d MiB budget)", key, mib, self.budget_mib)
            return self._held(warm, vault, pinned)

    @staticmethod
    def _held(warm: _Warm, vault: Path | None, pinned: bool) -> "Embedder":
        """One more hold of `vault` on the model (the caller holds the lock)."""
        warm.pinned = warm.pinned or pinned
        if vault is not None:
            warm.vaults[vault] = warm.vaults.get(vault, 0) + 1
        return warm.embedder

    def release(self, embedder: "Embedder", vault: Path) -> None:
        """One hold of `vault` on the model is let go (it closed): the model is unloaded when no vault holds it
        (and it is not the default)."""
        with self._lock:
            for warm in self._warm.values():
                if warm.embedder is embedder and vault in warm.vaults:
                    warm.vaults[vault] -= 1
                    if not warm.vaults[vault]:
                        del warm.vaults[vault]
            self._unload_unused()

    def _unload_unused(self) -> None:
        from hebbs.embedding.embed import unload_embedder

        for key, warm in list(self._warm.items()):
            if not warm.vaults and not warm.pinned:
                del self._warm[key]
                unload_embedder(warm.embedder)
                log.info("model %s unloaded: no open vault uses it", key)

    def describe(self) -> list[ModelStatus]:
        with self._lock:
            return [ModelStatus(id=w.embedder.model_id, dimension=w.embedder.dim, warm_mib=w.mib,
                                vaults=sorted(str(v) for v in w.vaults), default=w.pinned)
                    for w in self._warm.values()]
