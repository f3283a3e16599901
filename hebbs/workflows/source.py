"""A memory's kept original: the section it was indexed from, exactly as it was in that file version,
even after the file changed or was deleted (store/originals.py keeps the bytes)."""

from __future__ import annotations

from ..errors import InvalidInput, NotFound
from ..schema import SourceSection
from ..core.open_vault import OpenVault
from ..store.originals import INDEX_FILE, Originals
from .revise import get


def source(vault: OpenVault, memory_id: str) -> SourceSection:
    """The section `memory_id` came from; a revision reads the version it held."""
    originals = Originals(vault.path, vault.config.sources)
    try:
        memory = get(vault, memory_id)
    except (NotFound, InvalidInput):
        # Forgotten with its file (by full id or a 6+ character suffix): the kept map still knows it.
        kept_id = originals.find_ref_id(memory_id)
        if kept_id is None and len(memory_id) < 26:
            raise NotFound(f"no memory id ends with {memory_id!r}") from None
        if kept_id is None:
            raise
        return originals.section(kept_id, originals.refs(kept_id)[-1])
    refs = originals.refs(memory.revision_of or memory.id)
    if not refs and originals.damaged_index is not None and memory.source is not None:
        raise NotFound(f"the original of memory {memory.id} cannot be looked up: the kept originals' index was "
                       f"damaged and moved aside to {originals.damaged_index} (the kept versions are still on "
                       f"disk); what is indexed from now on is kept again")
    if not refs and originals.index_missing and memory.source is not None:
        raise NotFound(f"the kept original of memory {memory.id} is missing: the kept originals' index "
                       f"{originals.dir / INDEX_FILE} was deleted (the kept versions are still on disk); run "
                       f"`hebbs doctor --vault {vault.path}`")
    if not refs:
        raise NotFound(f"memory {memory.id} has no kept original: it was not indexed from a note "
                       "(or [sources] keep was false when it was)")
    section_hash = memory.context.get("section_hash")
    ref = next((r for r in reversed(refs) if r.section_hash == section_hash), None)
    if ref is None:
        raise NotFound(f"the original of memory {memory.id} was pruned (see [sources] in the vault's config.toml)")
    return originals.section(memory.id, ref)
