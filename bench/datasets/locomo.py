"""LoCoMo (../shared/data/locomo-dev): conversations whose turns carry their session's date, and
their questions (the adversarial category 5 left out). CC BY-NC, evaluation-only: read in place."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from bench.harness import shared

DEFAULT_DATA = shared("data/locomo-dev")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def session_time(text: str) -> dt.datetime:
    # e.g. "1:56 pm on 8 May, 2023"
    return dt.datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=dt.timezone.utc)


def turn_text(turn: dict) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shared a photo: {turn['blip_caption']}]"
    return text


def load(data_dir: Path) -> list[dict]:
    conversations = []
    for path in sorted(data_dir.glob("*.json")):
        raw = json.loads(path.read_text())
        turns = []
        n = 1
        while f"session_{n}" in raw:
            when = session_time(raw[f"session_{n}_date_time"])
            for i, turn in enumerate(raw[f"session_{n}"]):
                # Turns of one session keep their order: a microsecond apart.
                turns.append({"dia_id": turn["dia_id"], "text": turn_text(turn),
                              "created_at": when + dt.timedelta(microseconds=i)})
            n += 1
        questions = [q for q in raw["qa"] if q.get("category") != 5 and q.get("evidence")]
        conversations.append({"name": path.stem, "turns": turns, "questions": questions})
    return conversations
