"""bench/ is a package run as `python -m bench NAME` on any machine: one percentile, no path edits,
no absolute paths of one machine (bench/harness.py, bench/report.py, bench/README.md)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from bench.harness import percentile, shared
from bench.report import write_result

BENCH = Path(__file__).resolve().parents[1] / "bench"


def test_percentile_is_numpys_linear_interpolation() -> None:
    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 100, 101):
        values = rng.random(n)
        for q in (0, 50, 95, 99, 100):
            assert percentile(values, q) == np.float64(np.percentile(values, q)) or \
                abs(percentile(values, q) - np.percentile(values, q)) < 1e-12


def test_bench_scripts_need_no_path_edits_and_name_no_machine() -> None:
    offenders = []
    for script in sorted(BENCH.rglob("*.py")):
        text = script.read_text()
        if "sys.path" in text and script.name != "harness.py":
            offenders.append(f"{script.name}: edits sys.path")
        if re.search(r"[\"'](/work|/home|/Users|/root)/", text):
            offenders.append(f"{script.name}: an absolute path of one machine")
        if re.search(r"^def (pct|percentiles?)\(", text, flags=re.M) and script.name != "harness.py":
            offenders.append(f"{script.name}: a percentile of its own (use bench.harness.percentile)")
    assert not offenders, offenders


def test_shared_data_honours_the_environment(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HEBBS_SHARED", str(tmp_path))
    assert shared("data/cisi") == tmp_path / "data" / "cisi"


def test_a_result_file_says_when_and_where(tmp_path: Path) -> None:
    import json

    path = write_result("demo", {"p50": 1.5}, path=tmp_path / "demo.json", sizes=[10])
    record = json.loads(path.read_text())
    assert record["bench"] == "demo" and record["figures"] == {"p50": 1.5} and record["sizes"] == [10]
    assert {"commit", "at", "machine"} <= record.keys()
