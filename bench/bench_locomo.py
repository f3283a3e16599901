"""Recall quality on LoCoMo (../shared/data/locomo-dev): evidence recall@5/@10/@20 and hit@10.

Every turn becomes a memory (entity = conversation, created_at = its session's date); every
non-adversarial question (category 5 left out) is a cue recalled within its conversation. Printed,
all measured in this run over the same vault: hebbs' default recall, similarity alone, lexical
alone, plain RRF (k=60) of the two, and fusion without MMR, overall and per category, plus query
latency p50/p95.

    .venv/bin/python -m bench locomo [--data ../shared/data/locomo-dev] [--json out.json]

The data is CC BY-NC and evaluation-only: it is read from shared/, never copied into the package.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench import report
from bench.datasets import locomo
from bench.workloads import conversations as conv_eval
from hebbs import Engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--json", type=Path, help="also write the tables here")
    parser.add_argument("--only", action="append", help="run only these configurations")
    parser.add_argument("--mmr", type=float, action="append", default=[],
                        help="also evaluate fusion with this MMR lambda (repeatable)")
    args = parser.parse_args()
    conversations = locomo.load(args.data)
    print(f"{sum(len(c['turns']) for c in conversations)} turns, "
          f"{sum(len(c['questions']) for c in conversations)} questions in {len(conversations)} conversations")
    with tempfile.TemporaryDirectory(prefix="hebbs-locomo-") as tmp, Engine.open(Path(tmp) / "vault") as engine:
        started = time.perf_counter()
        dia_of = conv_eval.build(engine, conversations)
        print(f"remembered in {time.perf_counter() - started:.1f} s")
        tables = [conv_eval.evaluate(name, conversations, dia_of, search)
                  for name, search in conv_eval.configurations(engine, args.mmr).items()
                  if not args.only or name in args.only or name.startswith("fusion, MMR")]
    conv_eval.print_table(tables)
    report.write_json(args.json, tables)


if __name__ == "__main__":
    main()
