"""Recall quality on a RocksDB vault and on PostgreSQL vaults (the daemon's local HNSW cache, pgvector): the
notes bench and LoCoMo dev with the same vectors, so only the store differs."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path


from hebbs import Engine

from bench.datasets import locomo as locomo_data
from bench.datasets import notes as notes_data
from bench.workloads import conversations as conv_eval
from bench.workloads import notes as notes_eval
from bench.workloads.team.common import attach


def notes_quality(embedder, stores: dict[str, tuple[str, str] | None]) -> dict[str, dict]:
    from hebbs.notes import index_notes

    questions = notes_data.load_questions()
    out = {}
    for label, store in stores.items():
        with tempfile.TemporaryDirectory(prefix="hebbs-team-notes-") as tmp:
            root = Path(tmp) / "notes"
            shutil.copytree(notes_data.DEFAULT_VAULT, root, ignore=shutil.ignore_patterns(".hebbs"))
            if store is not None:
                attach(root / ".hebbs", store[0], f"notes-{Path(tmp).name}", store[1])
            with Engine.open(root / ".hebbs", embedder=embedder) as engine:
                index_notes(engine, root)
                out[label] = t = notes_eval.scores(label, notes_eval.hebbs_rankings(engine, questions), questions)
                print(f"notes, {label}: hit@1 {t['hit@1']:.3f}, hit@5 {t['hit@5']:.3f}, MRR@10 {t['mrr@10']:.3f}",
                      flush=True)
    return out


def locomo_quality(embedder, stores: dict[str, tuple[str, str] | None]) -> dict[str, dict]:
    conversations = locomo_data.load(locomo_data.DEFAULT_DATA)
    out = {}
    for label, store in stores.items():
        with tempfile.TemporaryDirectory(prefix="hebbs-team-locomo-") as tmp:
            vault = Path(tmp) / "vault"
            if store is not None:
                attach(vault, store[0], f"locomo-{Path(tmp).name}", store[1])
            with Engine.open(vault, embedder=embedder) as engine:
                dia_of = conv_eval.build(engine, conversations)
                search = conv_eval.configurations(engine, [])["hebbs default"]
                out[label] = t = conv_eval.evaluate(label, conversations, dia_of, search)
                print(f"LoCoMo dev, {label}: recall@10 {t['overall']['recall@10']:.3f}, hit@10 "
                      f"{t['overall']['hit@10']:.3f}, p50 {t['latency_ms']['p50']:.1f} ms", flush=True)
    return out
