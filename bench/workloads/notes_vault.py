"""A deterministic folder of notes with realistic, varied prose (front matter, headings, lists, tags,
wiki-links, the odd code block and the odd long section): bench_vault indexes it, bench_index_forget
forgets from it."""

from __future__ import annotations

import random
from pathlib import Path

PEOPLE = ["Alice", "Bob", "Carol", "Dmitri", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kemal", "Lena"]
CLIENTS = ["Acme", "Globex", "Initech", "Umbrella", "Stark Logistics", "Wayne Foods", "Hooli", "Vandelay"]
SYSTEMS = ["deploy pipeline", "billing service", "search index", "staging database", "mobile app", "data warehouse",
           "auth gateway", "message queue", "reporting job", "CRM integration", "cache cluster", "CI runners"]
ADJ = ["reliable", "slow", "fast", "flaky", "stable", "expensive", "cheap", "healthy", "overloaded", "outdated"]
VERBS = ["migrated", "upgraded", "paused", "reviewed", "rewrote", "documented", "load-tested", "rolled back",
         "audited", "split", "merged", "retired"]
EVENTS = ["the March outage", "the quarterly review", "the security audit", "the vendor call", "the offsite",
          "the last sprint", "the budget meeting", "the incident retro", "the customer workshop"]
TAGS = ["decision", "todo", "risk", "idea", "followup", "customer", "ops", "hiring", "budget", "security"]
TEMPLATES = [
    "{p} said the {s} has been {a} since {e}.",
    "After {e}, {p} {v} the {s} and wrote down what changed.",
    "{c} asked whether the {s} could be {v} before the end of the quarter.",
    "We agreed that the {s} is {a} enough for now, but {p} wants another look after {e}.",
    "The {s} cost us about {n} hours last month, mostly because it was {a}.",
    "{p} and {q} disagree about the {s}: one thinks it is {a}, the other wants it {v}.",
    "During {e} {c} mentioned that their team relies on the {s} every day.",
    "Open question from {p}: should the {s} be {v} or replaced outright?",
    "The numbers from {e} show {n} failed runs of the {s}.",
    "{q} will follow up with {c} about the {s} next week.",
    "Nobody remembers why the {s} was {v}; {p} suspects it happened around {e}.",
    "For {c}, the {s} matters more than anything else on the roadmap.",
]


def sentence(rng: random.Random) -> str:
    return rng.choice(TEMPLATES).format(
        p=rng.choice(PEOPLE), q=rng.choice(PEOPLE), c=rng.choice(CLIENTS), s=rng.choice(SYSTEMS),
        a=rng.choice(ADJ), v=rng.choice(VERBS), e=rng.choice(EVENTS), n=rng.randint(2, 400))


def paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(sentence(rng) for _ in range(sentences))


def section_body(rng: random.Random, notes: int) -> str:
    # Lengths vary from one line to several paragraphs; about 1 in 25 is longer than the model's limit.
    size = rng.choice([1, 2, 2, 3, 3, 4, 5, 6, 8]) if rng.random() > 0.04 else rng.randint(18, 30)
    parts = []
    left = size
    while left > 0:
        n = min(left, rng.randint(1, 4))
        parts.append(paragraph(rng, n))
        left -= n
    if rng.random() < 0.3:
        parts.append("\n".join(f"- {sentence(rng)}" for _ in range(rng.randint(2, 4))))
    if rng.random() < 0.25:
        parts[-1] += f" See [[note-{rng.randrange(notes)}]]."
    if rng.random() < 0.3:
        parts[-1] += f" #{rng.choice(TAGS)}"
    if rng.random() < 0.05:
        parts.append("```\n$ make deploy ENV=staging\n```")
    return "\n\n".join(parts)


def make_vault(root: Path, notes: int, seed: int = 42) -> int:
    """Write the vault; returns the number of bytes written."""
    rng = random.Random(seed)
    total = 0
    for n in range(notes):
        lines = []
        if rng.random() < 0.5:
            lines.append(f"---\ntags: [{rng.choice(TAGS)}, {rng.choice(TAGS)}]\nclient: {rng.choice(CLIENTS)}\n---")
        lines.append(f"# {rng.choice(CLIENTS)}: {rng.choice(SYSTEMS)} notes {n}\n")
        if rng.random() < 0.5:
            lines.append(paragraph(rng, rng.randint(1, 2)) + "\n")
        for s in range(rng.choice([3, 4, 4, 5, 5, 6])):
            lines.append(f"## {rng.choice(['Status', 'Decision', 'Risks', 'Next steps', 'Context', 'Notes'])} {s}\n")
            lines.append(section_body(rng, notes) + "\n")
        path = root / f"area-{n % 20:02d}" / f"note-{n}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = "\n".join(lines).encode()
        path.write_bytes(data)
        total += len(data)
    return total
