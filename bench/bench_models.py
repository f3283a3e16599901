"""The embedding models side by side, each through hebbs' default recall: quality, abstention, speed,
memory; and which one issue 43's rule makes the default.

Each setting (a registry model, optionally with another cue graph) runs in a child process of its
own, one after the other, over the same data:
- notes: the notes corpus (bench/notes_corpus.md), the notes that answer its 50 questions
  (bench/notes_questions.jsonl) and a seeded sample of the others: hit@1 and MRR@10 by file, default
  recall. docs_cues' unanswerable cues are asked of it too (its answerable ones are about hebbs).
- LoCoMo dev (../shared/data/locomo-dev), one vault per conversation: evidence recall@10 of default
  recall (top_k 10), the same recalls bench_abstention.py makes.
- abstention, bench_abstention.py's cues and split: the calibration fitted for this model on the fit
  part (bench_abstention.fit, pick_threshold: the procedure that fitted MiniLM's), reported on the
  held-out part: answerable cues abstained (false) and unanswerable ones abstained. The fitted
  constants are what scripts/fit_calibration.py writes into hebbs/models/registry.toml.
- CISI and MEDLINE (bench/datasets): nDCG@10 and recall@100 of default recall.
- one cue's embedding, warm (the cue session), short and paragraph: p50 and p99 of interleaved runs.
- indexing: passages per second of remember_many over the LoCoMo turns and the abstracts.
- a real daemon on a fresh vault of this repository's docs/ pages under 20 KB (`model` set in its
  config.toml): the first index's wall time (the model's load included), the daemon's RSS once warm
  (after the index and 20 recalls), the vault's size on disk.

Subsampling (--conversations, --docs, --notes-files, --queries) is printed with the figures. The default rule: the best
quality (mean of the notes MRR, LoCoMo R@10 and CISI/MEDLINE nDCG@10) among the settings whose warm
short-cue p50 is within 3x MiniLM's, whose indexing time per passage is within 3x MiniLM's and whose
warm daemon stays under 1 GB RSS.

    .venv/bin/python -m bench models [--settings minilm bge gemma] [--conversations 30 42] [--docs 300]
                                     [--out bench/results/DATE-models.md] [--rows-dir DIR] [--keep DIR2]

(the run of bench/results/2026-12-06-models.md; its notes say what EmbeddingGemma's left out).

Evaluation data (LoCoMo, CISI) is read from shared/, never copied into the package.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import baselines as bl
from bench.harness import REPO, machine_note, module_argv, percentile, run, shared

SHORT_CUE = "Who is Acme's CEO?"
PARAGRAPH_CUE = " ".join(["The committee met on Tuesday to review the budget for the new library wing,"
                          " and approved the plan with two changes to the reading room."] * 3)
# name -> (registry model, cue graph override or None)
SETTINGS: dict[str, tuple[str, str | None]] = {
    "minilm": ("all-MiniLM-L6-v2", None),
    "bge": ("bge-small-en-v1.5", None),
    "gemma": ("embeddinggemma-300m", None),
    "gemma-int8": ("embeddinggemma-300m", "int8"),
}
RSS_LIMIT_MB = 1024
WITHIN = 3.0


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def _cue_times(embedder, rounds: int) -> dict[str, float]:
    embedder.cue_session_policy = "always"
    for _ in range(3):
        embedder.embed_query(SHORT_CUE)
        embedder.embed_query(PARAGRAPH_CUE)
    times: dict[str, list[float]] = {"short": [], "paragraph": []}
    for i in range(rounds):
        for kind, cue in (("short", SHORT_CUE), ("paragraph", PARAGRAPH_CUE)):
            text = f"{cue} {i}"  # no cache anywhere may answer a repeated cue
            t = time.perf_counter()
            embedder.embed_query(text)
            times[kind].append((time.perf_counter() - t) * 1000)
    embedder.cue_session_policy = "auto"
    return {f"{k} {q}": percentile(v, n) for k, v in times.items() for q, n in (("p50", 50), ("p99", 99))}


def _documents(engine_open, name: str, texts, queries, indexing: list[tuple[int, float]]) -> dict[str, float]:
    from bench.workloads import documents

    with tempfile.TemporaryDirectory(prefix=f"hebbs-models-{name}-") as tmp, engine_open(Path(tmp) / "vault") as engine:
        t = time.perf_counter()
        doc_of = documents.build(engine, texts)
        indexing.append((len(texts), time.perf_counter() - t))
        s = documents.score(name, documents.hebbs_rankings(engine, doc_of, queries), queries)
    return {"ndcg@10": s["ndcg@10"], "recall@100": s["recall@100"], "docs": len(texts), "queries": len(queries)}


def sub_collection(texts, queries, docs: int):
    """A seeded sample of `docs` documents, and the queries with a judged document among them, judged on
    those alone (0: the whole collection)."""
    if not docs or docs >= len(texts):
        return texts, queries
    kept = random.Random(43).sample(texts, docs)
    ids = {i for i, _ in kept}
    return kept, [(i, q, rel & ids) for i, q, rel in queries if rel & ids]


def notes_sample(root: Path, others: int) -> list[str]:
    """The notes corpus files that answer its questions, and a seeded sample of `others` more."""
    from bench.datasets import notes as notes_data

    answers = {a for q in notes_data.load_questions() for a in q["answers"]}
    rest = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md")
                  if p.relative_to(root).as_posix() not in answers)
    return sorted(answers) + random.Random(155).sample(rest, min(others, len(rest)))


# The daemon indexes docs/'s smaller pages (the whole folder, 640 KB, would take EmbeddingGemma most
# of an hour on this machine): the same files for every model.
DAEMON_DOCS_BYTES = 20_000


def _daemon(model: str, work: Path) -> dict[str, float]:
    """A fresh vault of docs/ indexed through a real daemon: first index, warm RSS, vault size."""
    from hebbs import Client
    from hebbs.paths import init_vault

    home, root = work / "h", work / "p"
    root.mkdir(parents=True)
    for page in sorted((REPO / "docs").glob("*.md")):
        if page.stat().st_size < DAEMON_DOCS_BYTES:
            shutil.copy2(page, root / page.name)
    vault, _ = init_vault(root, home)
    config = vault / "config.toml"
    config.write_text(f'model = "{model}"\n' + config.read_text())
    with Client(vault=root, home=home) as client:
        pid = client.ping().pid
        try:
            t = time.perf_counter()
            summary = client.index(root)
            first_index = time.perf_counter() - t
            for i in range(20):
                client.recall(f"how does recall decide it knows nothing {i}")
            rss = _rss_mb(pid)
        finally:
            client.shutdown()
    for _ in range(200):
        if not Path(f"/proc/{pid}").exists():
            break
        time.sleep(0.1)
    return {"pages": float(len(list(root.glob("*.md")))), "first_index_s": first_index, "sections": float(getattr(summary, "sections_total", 0) or 0),
            "rss_mb": rss, "vault_mb": _size_mb(vault)}


def _answer_rows(engine_open, workdir: Path, rows: list[dict]) -> None:
    """bench_abstention.run, keeping each result's note file too (for the notes hit@1 and MRR)."""
    from bench.workloads import abstention as ab
    from hebbs.recall import confidence as conf

    by_vault: dict[str, list[dict]] = {}
    for row in rows:
        by_vault.setdefault(row["vault"], []).append(row)
    for vault, items in by_vault.items():
        with engine_open(workdir / vault) as engine:
            for row in items:
                found = engine.recall(row["cue"], top_k=ab.TOP_K, reinforce=False)
                row["features"] = [[r.details["confidence_features"][f] for f in conf.FEATURES] for r in found]
                row["labels"] = [ab._relevant(row, r.memory) for r in found]
                row["result_files"] = [r.memory.source.file_path if r.memory.source is not None else ""
                                       for r in found]
                row["engine_confidence"] = found.confidence


def _notes_scores(rows: list[dict]) -> dict[str, float]:
    hugo = [r for r in rows if r["kind"] == "notes answerable (Hugo)"]
    hits, mrrs = [], []
    for r in hugo:
        # The corpus sits under corpus/ in the vault; the questions name files relative to the corpus.
        files = bl.dedupe(f.removeprefix("corpus/") for f in r["result_files"])
        hits.append(bl.hit_at(files, set(r["files"]), 1))
        mrrs.append(bl.mrr_at(files, set(r["files"]), 10))
    return {"hit@1": statistics.fmean(hits), "mrr@10": statistics.fmean(mrrs), "questions": len(hugo)}


def _locomo_recall(rows: list[dict]) -> dict[str, float]:
    answerable = [r for r in rows if r["kind"] == "locomo answerable"]
    recalls = [min(1.0, sum(r["labels"]) / len(r["relevant"])) for r in answerable if r["relevant"]]
    return {"recall@10": statistics.fmean(recalls), "questions": len(recalls)}


def _abstention(rows: list[dict]) -> dict:
    from bench.workloads import abstention as ab

    fit_rows = [r for r in rows if r["part"] == "fit" and r["goal"]]
    test = [r for r in rows if r["part"] == "report" and r["goal"]]
    coefficients, intercept = ab.fit(fit_rows)
    threshold = ab.pick_threshold(fit_rows, [ab.best(r, coefficients, intercept) for r in fit_rows])
    scores = [ab.best(r, coefficients, intercept) for r in test]
    pos = [s for r, s in zip(test, scores) if r["answerable"]]
    neg = [s for r, s in zip(test, scores) if not r["answerable"]]
    return {"coefficients": list(coefficients), "intercept": intercept, "threshold": threshold,
            "false_abstained": sum(s < threshold for s in pos) / len(pos),
            "unanswerable_abstained": sum(s < threshold for s in neg) / len(neg),
            "auc": ab.auc(pos, neg), "answerable": len(pos), "unanswerable": len(neg)}


def child(setting: str, args: argparse.Namespace) -> dict:
    from bench.workloads import abstention as ab
    from bench.datasets import cisi, locomo, medline
    from bench.datasets import notes as notes_data
    from hebbs import Engine
    from hebbs.notes import index_notes
    from hebbs.embedding.embed import get_embedder, limit_blas_threads

    limit_blas_threads(1)  # as the daemon: the model's threads, not OpenBLAS's, use the cores
    model, cue_graph = SETTINGS[setting]
    t = time.perf_counter()
    embedder = get_embedder(model)
    if cue_graph:
        embedder.cue_graph = cue_graph
    out: dict = {"setting": setting, "model": model, "cue_graph": embedder.cue_graph, "dim": embedder.dim,
                 "load_s": time.perf_counter() - t}

    def engine_open(path: Path) -> Engine:
        return Engine.open(path, model=model)

    out["cue_ms"] = _cue_times(embedder, args.rounds)
    print(f"[{setting}] loaded in {out['load_s']:.1f} s; cue p50 short {out['cue_ms']['short p50']:.1f} ms",
          file=sys.stderr)
    indexing: list[tuple[int, float]] = []
    work = Path(tempfile.mkdtemp(prefix=f"hebbs-models-{setting}-"))
    try:
        data = shared("data/locomo-dev")
        every = locomo.load(data)
        conversations = [c for c in every if c["name"] in set(args.conversations)]
        raws = {c["name"]: json.loads((data / f"{c['name']}.json").read_text()) for c in every}
        if args.reuse:  # vaults of this model an earlier run built (their indexing is not timed again)
            shutil.copytree(args.reuse, work / "answers", dirs_exist_ok=True)
        for conv in conversations:  # as bench_abstention's build_vaults, with this setting's model
            if (work / "answers" / f"locomo-{conv['name']}").exists():
                continue
            with engine_open(work / "answers" / f"locomo-{conv['name']}") as engine:
                t = time.perf_counter()
                engine.remember_many([{"content": x["text"], "created_at": x["created_at"]} for x in conv["turns"]],
                                     check_contradictions=False)
                indexing.append((len(conv["turns"]), time.perf_counter() - t))
        notes = work / "answers" / "notes"
        for rel in [] if args.no_notes else notes_sample(notes_data.DEFAULT_VAULT, args.notes_files):
            (notes / "corpus" / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(notes_data.DEFAULT_VAULT / rel, notes / "corpus" / rel)
        if not args.no_notes:
            with engine_open(notes / ".hebbs") as engine:
                index_notes(engine, notes, contradictions=False)
        turns = sum(len(c["turns"]) for c in conversations)
        # The notes vault holds Hugo's docs alone: docs_cues' answerable cues (about hebbs) are not
        # answerable there, its unanswerable ones stay so.
        # --cross-all: the other conversations' questions are asked of these vaults as unanswerable cues
        # (as bench_abstention does with all five) without building the other vaults.
        asked = ab.cues(every if args.cross_all else conversations, raws)
        built = {f"locomo-{c['name']}" for c in conversations}
        rows = [r for r in asked if (r["vault"] in built or r["vault"].startswith("notes"))
                and not (r["vault"].startswith("notes") and (args.no_notes or r["answerable"] and "Hugo" not in r["kind"]))]
        t = time.perf_counter()
        _answer_rows(engine_open, work / "answers", rows)
        out["recalls"] = {"n": len(rows), "s": time.perf_counter() - t}
        if not args.no_notes:
            out["notes"] = _notes_scores(rows)
        out["locomo"] = _locomo_recall(rows)
        if any(r["part"] == "report" for r in rows):
            out["abstention"] = _abstention(rows)
        out["turns"] = turns
        if args.rows_dir:
            args.rows_dir.mkdir(parents=True, exist_ok=True)
            (args.rows_dir / f"{setting}.json").write_text(json.dumps(rows))
        print(f"[{setting}] answers done: {json.dumps(out['locomo'])} {json.dumps(out.get('notes'))}", file=sys.stderr)
        for name, module in () if args.no_documents else (("cisi", cisi), ("medline", medline)):
            texts, queries = sub_collection(*module.load(module.DEFAULT_DATA), args.docs)
            queries = queries[: args.queries] if args.queries else queries
            out[name] = _documents(engine_open, name, texts, queries, indexing)
            print(f"[{setting}] {name}: {json.dumps(out[name])}", file=sys.stderr)
        passages = sum(n for n, _ in indexing)
        if passages:
            out["indexing"] = {"passages": passages, "s": sum(s for _, s in indexing),
                               "per_s": passages / sum(s for _, s in indexing)}
        if not cue_graph and not args.no_daemon:  # the daemon serves the model's own cue graph
            out["daemon"] = _daemon(model, work / "daemon")
            print(f"[{setting}] daemon: {json.dumps(out['daemon'])}", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


QUALITY_PARTS = ("notes", "locomo", "cisi", "medline")


def quality(r: dict) -> float | None:
    """The mean of notes MRR@10, LoCoMo R@10 and CISI's and MEDLINE's nDCG@10; None when a part was left out."""
    if any(part not in r for part in QUALITY_PARTS):
        return None
    return statistics.fmean([r["notes"]["mrr@10"], r["locomo"]["recall@10"], r["cisi"]["ndcg@10"],
                             r["medline"]["ndcg@10"]])


def pick_default(results: dict[str, dict]) -> tuple[str, dict[str, str]]:
    """Issue 43's rule, against MiniLM measured in the same run; returns (setting, why each was out).
    A setting with a part left out is out unless it is MiniLM."""
    base = results["minilm"]
    out: dict[str, str] = {}
    for name, r in results.items():
        reasons = []
        if r["cue_ms"]["short p50"] > WITHIN * base["cue_ms"]["short p50"]:
            reasons.append(f"short cue {r['cue_ms']['short p50'] / base['cue_ms']['short p50']:.1f}x MiniLM's")
        if "indexing" in r and base["indexing"]["per_s"] / r["indexing"]["per_s"] > WITHIN:
            reasons.append(f"indexing {base['indexing']['per_s'] / r['indexing']['per_s']:.1f}x MiniLM's time")
        elif "indexing" not in r and "daemon" in r and "daemon" in base:  # the docs/ index times the same text
            ratio = r["daemon"]["first_index_s"] / base["daemon"]["first_index_s"]
            if ratio > WITHIN:
                reasons.append(f"first index of docs/ {ratio:.1f}x MiniLM's time")
        daemon = r.get("daemon")
        if daemon and daemon["rss_mb"] >= RSS_LIMIT_MB:
            reasons.append(f"warm daemon RSS {daemon['rss_mb']:.0f} MB")
        if quality(r) is None:
            reasons.append("quality not measured in full")
        out[name] = "; ".join(reasons)
    eligible = [n for n in results if not out[n]]
    return max(eligible, key=lambda n: quality(results[n]) or 0.0), out


def _locomo_of(rows_dir: Path | None, setting: str, conversation: str) -> float | None:
    """LoCoMo R@10 over one conversation's questions, from the rows a run kept."""
    path = rows_dir / f"{setting}.json" if rows_dir else None
    if path is None or not path.exists():
        return None
    rows = [r for r in json.loads(path.read_text()) if r["vault"] == f"locomo-{conversation}"]
    return _locomo_recall(rows)["recall@10"] if rows else None


def _cell(fn, r: dict) -> str:
    try:
        return fn(r)
    except (KeyError, TypeError):
        return "not measured"


def table(results: dict[str, dict], rows_dir: Path | None = None, conversation: str = "30") -> list[str]:
    each = {name: _locomo_of(rows_dir, name, conversation) for name in results}
    rows = [
        ("model (cue graph)", lambda r: f"{r['model']} ({r['cue_graph']})"),
        ("notes hit@1 / MRR@10", lambda r: f"{r['notes']['hit@1']:.3f} / {r['notes']['mrr@10']:.3f}"),
        ("CISI nDCG@10 / R@100", lambda r: f"{r['cisi']['ndcg@10']:.3f} / {r['cisi']['recall@100']:.3f}"),
        ("MEDLINE nDCG@10 / R@100", lambda r: f"{r['medline']['ndcg@10']:.3f} / {r['medline']['recall@100']:.3f}"),
        ("LoCoMo dev R@10 (default recall)", lambda r: f"{r['locomo']['recall@10']:.3f} ({r['locomo']['questions']} q.)"),
        (f"LoCoMo conversation {conversation} alone, R@10", lambda r: f"{each[r['setting']]:.3f}"),
        ("abstained: false / unanswerable", lambda r: f"{r['abstention']['false_abstained']:.1%} / "
                                                      f"{r['abstention']['unanswerable_abstained']:.1%}"),
        ("confidence ROC AUC (held out)", lambda r: f"{r['abstention']['auc']:.3f}"),
        ("quality (mean of MRR, R@10, 2 nDCG)", lambda r: f"{quality(r):.3f}"),
        ("cue short p50 / p99 ms", lambda r: f"{r['cue_ms']['short p50']:.1f} / {r['cue_ms']['short p99']:.1f}"),
        ("cue paragraph p50 / p99 ms", lambda r: f"{r['cue_ms']['paragraph p50']:.1f} / "
                                                 f"{r['cue_ms']['paragraph p99']:.1f}"),
        ("indexing passages/s", lambda r: f"{r['indexing']['per_s']:.1f}"),
        ("warm daemon RSS MB", lambda r: f"{r['daemon']['rss_mb']:.0f}"),
        ("first index of docs/ s (sections)", lambda r: f"{r['daemon']['first_index_s']:.1f} "
                                                        f"({r['daemon']['sections']:.0f})"),
        ("vault size (docs/) MB", lambda r: f"{r['daemon']['vault_mb']:.1f}"),
    ]
    lines = ["| | " + " | ".join(results) + " |", "|---|" + "---|" * len(results)]
    for label, cell in rows:
        lines.append(f"| {label} | " + " | ".join(_cell(cell, r) for r in results.values()) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", nargs="+", default=["minilm", "bge", "gemma"], choices=list(SETTINGS))
    parser.add_argument("--conversations", nargs="+", default=["26", "30", "42"],
                        help="LoCoMo dev conversations (26, 30, 41 are bench_abstention's fit part)")
    parser.add_argument("--docs", type=int, default=0, help="a seeded sample of N CISI / MEDLINE abstracts, and the "
                        "queries with a judged abstract among them (0: all)")
    parser.add_argument("--notes-files", type=int, default=30, help="Hugo notes beside the 61 that answer "
                        "the questions (a seeded sample)")
    parser.add_argument("--queries", type=int, default=0, help="only the first N CISI / MEDLINE queries (0: all)")
    parser.add_argument("--rounds", type=int, default=40, help="timed runs of each cue")
    parser.add_argument("--rows-dir", type=Path, help="keep each setting's recall rows (scripts/fit_calibration.py)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / f"{dt.date.today()}-models.md")
    parser.add_argument("--note", action="append", default=[], help="a line to add under the data (what a "
                        "setting left out and why)")
    parser.add_argument("--no-notes", action="store_true", help="leave the notes vault out (its rows too)")
    parser.add_argument("--no-daemon", action="store_true", help="leave the daemon's docs/ index out")
    parser.add_argument("--cross-all", action="store_true", help="ask every other LoCoMo dev conversation's "
                        "questions as unanswerable cues, not only those of --conversations")
    parser.add_argument("--no-documents", action="store_true", help="leave CISI and MEDLINE out")
    parser.add_argument("--reuse", type=Path, help="a folder of this model's LoCoMo vaults (locomo-N) built before")
    parser.add_argument("--keep", type=Path, help="also keep each setting's figures (SETTING.json) here")
    parser.add_argument("--report-only", action="store_true", help="no run: the table from the figures --keep kept")
    parser.add_argument("--child", choices=list(SETTINGS), help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.json.write_text(json.dumps(child(args.child, args)))
        return
    started = time.perf_counter()
    results: dict[str, dict] = {}
    if args.report_only:
        results = {s: json.loads((args.keep / f"{s}.json").read_text()) for s in args.settings
                   if (args.keep / f"{s}.json").exists()}
    with tempfile.TemporaryDirectory(prefix="hebbs-models-") as tmp:
        for setting in [] if args.report_only else args.settings:
            path = Path(tmp) / f"{setting}.json"
            argv = module_argv("bench.bench_models", "--child", setting, "--json", path, "--rounds", args.rounds,
                               "--queries", args.queries, "--docs", args.docs, "--notes-files", args.notes_files,
                               "--conversations", *args.conversations)
            if args.rows_dir:
                argv += ["--rows-dir", str(args.rows_dir)]
            argv += [f for f, on in (("--no-notes", args.no_notes), ("--no-documents", args.no_documents),
                                     ("--no-daemon", args.no_daemon), ("--cross-all", args.cross_all)) if on]
            argv += ["--reuse", str(args.reuse)] if args.reuse else []
            t = time.perf_counter()
            run(argv, check=True, env=os.environ.copy())
            results[setting] = json.loads(path.read_text())
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, args.keep / f"{setting}.json")
            print(f"{setting}: {time.perf_counter() - t:.0f} s", file=sys.stderr)
    if args.no_notes or args.no_documents or args.no_daemon or "minilm" not in results:
        # The table and the rule need every part, and MiniLM measured in the same run: a partial run
        # (rows for scripts/fit_calibration.py, one model's LoCoMo figure) prints what it measured.
        for name, r in results.items():
            print(f"{name}: {json.dumps({k: v for k, v in r.items() if k != 'abstention'})}")
        print("partial run (a part left out, or no minilm to compare with): no table, no default picked")
        return
    pick, out_by = pick_default(results)
    first = next(iter(results.values()))
    title = ("the table rebuilt from the figures each setting's run kept (--keep)" if args.report_only
             else f"one run, {machine_note()}, {time.perf_counter() - started:.0f} s")
    lines = [f"# Embedding models ({dt.date.today()}: {title})",
             "", "`python -m bench models " + " ".join(sys.argv[1:]) + "`", "",
             f"Data: notes: the Hugo notes that answer the {first['notes']['questions']} questions and "
             f"{args.notes_files} more (seeded sample); LoCoMo dev conversations "
             f"{', '.join(args.conversations)} ({first['locomo']['questions']} questions, {first['turns']} turns: "
             f"a subsample of the five); CISI {first['cisi']['docs']} abstracts / {first['cisi']['queries']} queries, "
             f"MEDLINE {first['medline']['docs']} / {first['medline']['queries']}"
             f"{' (a seeded sample of the abstracts, each query judged on those: figures not comparable with the full collections)' if args.docs else ''}; abstention on the held-out part "
             f"({first['abstention']['answerable']} answerable, {first['abstention']['unanswerable']} unanswerable "
             "cues), each model's calibration fitted on the fit part; the daemon indexes docs/'s "
             f"{int(first['daemon']['pages'])} pages under {DAEMON_DOCS_BYTES // 1000} KB.", "", *[f"- {n}" for n in args.note], "",
             *table(results, args.rows_dir, args.conversations[0]), ""]
    for name, why in out_by.items():
        lines.append(f"- {name}: {'within the rule' if not why else 'out: ' + why}")
    lines += ["", f"The rule picks **{pick}** ({results[pick]['model']}): the best quality within 3x MiniLM's warm "
              "short cue and indexing time, under 1 GB of warm daemon RSS.", "",
              "Fitted calibration (bench_abstention.fit on the fit part):", ""]
    for name, r in results.items():
        a = r.get("abstention")
        if a:
            lines.append(f"- {name}: coefficients {a['coefficients']}, intercept {a['intercept']}, "
                         f"threshold {a['threshold']}")
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)


if __name__ == "__main__":
    main()
