"""Markdown vaults: index a notes folder into its engine (`ROOT/.hebbs/`) and keep it in step.

    from hebbs import Engine
    from hebbs.vault import index_vault, watch_vault

    with Engine.open(root / ".hebbs") as engine:
        summary = index_vault(engine, root)            # phase 1 + phase 2
        watcher = watch_vault(engine, root)            # then follow edits
        ...
        watcher.stop()

How it works, the manifest, the section split and the watcher timings: docs/vault.md.
"""

from __future__ import annotations

from .indexer import IndexSummary, Plan, Progress, apply_plan, index_vault, scan_vault
from .parse import Link, ParsedNote, Section, parse_note
from .status import FileStatus, SectionStatus, list_vault
from .watch import VaultWatcher, watch_vault

__all__ = ["index_vault", "scan_vault", "apply_plan", "VaultWatcher", "watch_vault", "list_vault", "IndexSummary",
           "Plan", "Progress", "FileStatus", "SectionStatus", "parse_note", "ParsedNote", "Section", "Link"]
