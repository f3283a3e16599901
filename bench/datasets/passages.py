"""The end-to-end passages and cues (bench_e2e and the benches reading its vault): every LoCoMo turn,
then the sentences of the CISI abstracts and, to reach the count, CISI titles; cues are LoCoMo
questions spread over the conversations, or paragraphs of three consecutive turns."""

from __future__ import annotations

import re

from bench.datasets import cisi, locomo

_SENTENCE_END = re.compile(r"(?<=[.?!])\s+(?=[A-Z])")


def corpus(n: int, cues: int) -> tuple[list[str], list[str]]:
    """n real passages and `cues` real questions (LoCoMo questions taken evenly across the data)."""
    conversations = locomo.load(locomo.DEFAULT_DATA)
    passages = [turn["text"] for conv in conversations for turn in conv["turns"]]
    docs = cisi.parse(cisi.DEFAULT_DATA / "CISI.ALL")
    for doc in docs.values():
        passages += [s.strip() for s in _SENTENCE_END.split(" ".join(doc.get("W", "").split())) if len(s.strip()) > 20]
    passages += [" ".join(doc.get("T", "").split()) for doc in docs.values() if doc.get("T")]
    passages = list(dict.fromkeys(passages))
    if len(passages) < n:
        raise SystemExit(f"only {len(passages)} passages in the shared data; ask for at most that many")
    questions = [q["question"] for conv in conversations for q in conv["questions"]]
    step = max(1, len(questions) // cues)
    return passages[:n], questions[::step][:cues]


def paragraphs(cues: int) -> list[str]:
    """`cues` paragraph cues: three consecutive turns of a LoCoMo conversation each, spread over the data."""
    conversations = locomo.load(locomo.DEFAULT_DATA)
    turns = [[turn["text"] for turn in conv["turns"]] for conv in conversations]
    joined = [" ".join(conv[i:i + 3]) for conv in turns for i in range(0, len(conv) - 2, 3)]
    step = max(1, len(joined) // cues)
    return joined[::step][:cues]
