"""The end-to-end vault (bench_e2e builds it in --workdir; bench_recall_cpu, bench_recall_tail and
bench_recall_wait read it) and the onnxruntime sessions its cues are embedded with."""

from __future__ import annotations

import argparse
import copy
from pathlib import Path
from typing import Any

import hebbs.offline  # noqa: F401 - before onnxruntime: keeps its telemetry off
from bench.datasets.passages import corpus
from hebbs import Engine, ScoringWeights
from hebbs.embedding.embed import _Sessions, limit_blas_threads

RELEVANCE_ONLY = ScoringWeights(relevance=1.0, recency=0.0, importance=0.0, reinforcement=0.0)
M, EF_CONSTRUCTION, EF_SEARCH, TOP_K = 16, 200, 50, 10


def e2e_arguments(description: str, cues: int, block: int, rounds: int | None = None) -> argparse.Namespace:
    """The command line of a bench that reads the vault an earlier run of bench_e2e built."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--workdir", type=Path, required=True, help="bench_e2e's, with its vault built")
    parser.add_argument("--cues", type=int, default=cues)
    if rounds is not None:
        parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--block", type=int, default=block)
    args = parser.parse_args()
    if not (args.workdir / "built").is_file():
        raise SystemExit(f"no vault built in {args.workdir}: run bench.bench_e2e --workdir {args.workdir} first")
    return args


def open_built(args: argparse.Namespace) -> tuple[Engine, list[str]]:
    """That vault, opened in process with numpy's BLAS at one thread as in the daemon, and its cues."""
    _, cues = corpus(10_000, args.cues)
    limit_blas_threads(1)
    return Engine.open(args.workdir / "vault"), cues


def ort_session(graph: Path, options: dict[str, Any] | None) -> Any:
    """An onnxruntime session of `graph` with these settings (None: onnxruntime's defaults)."""
    ort = hebbs.offline.import_onnxruntime()
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    if options is not None:
        so.intra_op_num_threads = options["threads"]
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.add_session_config_entry("session.intra_op.allow_spinning", "1" if options["spin"] else "0")
        if options["spin"] is not True and options["spin"]:  # a number: how long idle workers spin, in us
            so.add_session_config_entry("session.intra_op.spin_duration_us", str(options["spin"]))
        if options.get("stop"):  # workers stop spinning when the run returns
            so.add_session_config_entry("session.force_spinning_stop", "1")
    return ort.InferenceSession(str(graph), so, providers=["CPUExecutionProvider"])


def session(embedder: Any, options: dict[str, Any] | None, graph: str = "float32") -> Any:
    """A copy of `embedder` that embeds every cue with one session of these settings, on the model's
    float32 graph (the peers') or on hebbs' int8 copy of it (its cue graph, docs/embedding.md)."""
    path = embedder.onnx_path if graph == "float32" else embedder._cues().path
    other = copy.copy(embedder)
    other._memories = _Sessions(path, embedder._threads, ort_session(path, options), one_by_one=graph == "int8")
    other.cue_session_policy, other.cue_graph = "never", "float32"  # every text through the session above
    return other
