"""Time words in a cue: hit@1/hit@5 with understanding on vs off, its cost, and LoCoMo's temporal questions.

Part 1, a diary written for this benchmark (below, in this file): a year of memories, several on the
same topic at different times (four dinners with Sam, three dentist visits...), so that for most cues
only the time tells the right memory from its siblings, among ~250 everyday fillers. 40 cues with
time words, each with the memory (or memories) it asks for. Configurations, in the same run over
the same memories: understanding off (recall.time_words.enabled = false), on (a memory from the
understood range has recency 1, any other 0: recall/scoring.py time_match), and the range used as a
hard filter (time_range = the understood range).

Part 2, the cost: `understand()` on cues with and without time words, and default recall p50 with
understanding on vs off.

Part 3, LoCoMo (../shared/data/locomo-dev, evaluation only, read in place): every turn a memory
dated by its session, every non-adversarial question recalled within its conversation "as of" the
conversation's last session (now = that date); recall@10 on vs off for the temporal category and
overall, how many questions had time words understood, and the recency window of untyped
memories (recall.untyped_recency_days) from 30 days to five years.

    .venv/bin/python -m bench.bench_timewords [--data ../shared/data/locomo-dev] [--skip-locomo]
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import statistics
import tempfile
import time
from pathlib import Path

import msgspec

from bench.harness import shared
from hebbs import Engine
from hebbs.config import RecallConfig
from hebbs.recall.timewords import understand

UTC = dt.timezone.utc
NOW = dt.datetime(2024, 3, 15, 18, 0, tzinfo=UTC)  # a Friday; the diary runs a year back from here
DEFAULT_UNTYPED_DAYS = RecallConfig().untyped_recency_days
UNTYPED_WINDOWS = (30.0, 90.0, 180.0, 365.0, 730.0, 1825.0)  # recall.untyped_recency_days tried


def at(date: str, hour: int = 12) -> dt.datetime:
    return dt.datetime.fromisoformat(date).replace(hour=hour, tzinfo=UTC)


# (key, date, hour, text): the memories the cues ask for, several per topic.
DIARY = [
    ("sam-thai", "2023-06-10", 20, "Dinner with Sam at the Thai place; we talked about his garden"),
    ("sam-italian", "2023-11-04", 20, "Dinner with Sam at the Italian place; he told me about his new job"),
    ("sam-sushi", "2024-03-08", 20, "Dinner with Sam at the sushi bar; we talked about the summer holidays"),
    ("sam-ramen", "2024-03-14", 19, "Dinner with Sam at the ramen shop; he worried about his sister"),
    ("dentist-clean", "2023-04-12", 9, "Dentist appointment: a routine cleaning, no cavities"),
    ("dentist-filling", "2023-10-02", 9, "Dentist appointment: a filling in the lower left molar"),
    ("dentist-crown", "2024-02-20", 9, "Dentist appointment: the new crown was fitted"),
    ("run-10k", "2023-05-21", 8, "Ran the 10k race in the city park in 52 minutes"),
    ("run-half", "2023-09-17", 8, "Ran the half marathon in 1 hour 58 minutes"),
    ("run-newyear", "2024-01-01", 10, "New year's run: 8 km along the river"),
    ("run-rain", "2024-03-10", 8, "Went for a 5 km run in the rain, 26 minutes"),
    ("mom-knee", "2023-07-04", 18, "Call with mom: she talked about her knee surgery"),
    ("mom-xmas", "2023-12-24", 18, "Call with mom about the Christmas plans"),
    ("mom-aunt", "2024-02-14", 18, "Call with mom: my aunt is visiting her in spring"),
    ("mom-school", "2024-03-13", 18, "Call with mom: she asked how the kids are doing at school"),
    ("road-mobile", "2023-08-15", 14, "Roadmap meeting: the team decided to drop the mobile app"),
    ("road-billing", "2023-12-05", 14, "Roadmap meeting: the Q1 goal is the billing revamp"),
    ("road-hire", "2024-03-05", 14, "Roadmap meeting: we will hire two more engineers"),
    ("road-postpone", "2024-03-12", 14, "Roadmap meeting: the billing launch is postponed to May"),
    ("book-overstory", "2023-05-30", 22, "Finished reading the book The Overstory"),
    ("book-hail", "2023-09-02", 22, "Finished reading the book Project Hail Mary"),
    ("book-tomorrow", "2024-01-20", 22, "Finished reading the book Tomorrow, and Tomorrow, and Tomorrow"),
    ("book-demon", "2024-02-27", 22, "Finished reading the book Demon Copperhead"),
    ("car-oil", "2023-06-28", 11, "The garage changed the car's oil"),
    ("car-tires", "2023-11-20", 11, "The garage put winter tires on the car"),
    ("car-brakes", "2024-03-01", 11, "The garage replaced the car's front brakes"),
    ("movie-oppen", "2023-07-22", 21, "Watched the movie Oppenheimer at the cinema"),
    ("movie-killers", "2023-10-14", 21, "Watched the movie Killers of the Flower Moon"),
    ("movie-wonka", "2023-12-30", 21, "Watched the movie Wonka with the kids"),
    ("movie-dune", "2024-03-09", 21, "Watched the movie Dune Part Two on the big screen"),
    ("trip-lisbon", "2023-08-03", 12, "Trip to Lisbon: trams, custard tarts and the sea"),
    ("trip-vienna", "2023-10-21", 12, "Weekend trip to Vienna for the museums"),
    ("trip-ski", "2024-02-10", 12, "Ski trip to Innsbruck with friends"),
    ("doc-allergy", "2023-06-05", 10, "Doctor visit: the allergy test found a grass pollen allergy"),
    ("doc-flu", "2023-10-09", 10, "Doctor visit: got the flu shot"),
    ("doc-blood", "2024-01-15", 10, "Doctor visit: blood test results, cholesterol is normal"),
    ("hair-may", "2023-05-05", 17, "Got a haircut, quite short this time"),
    ("hair-sep", "2023-09-29", 17, "Got a haircut at the new barber"),
    ("hair-feb", "2024-02-02", 17, "Got a haircut and trimmed the beard"),
    ("bday-lena", "2023-07-15", 16, "Birthday party for Lena's 40th at the lake"),
    ("bday-tom", "2023-12-12", 20, "Birthday dinner for Tom at the steakhouse"),
    ("bday-priya", "2024-03-15", 9, "Birthday cake at the office for Priya"),
    ("house-paint", "2023-04-30", 15, "House: painted the bedroom blue"),
    ("house-tap", "2023-09-10", 15, "House: fixed the leaking kitchen tap"),
    ("house-boiler", "2024-03-15", 10, "House: the plumber came to repair the boiler"),
    ("bake-cookies", "2023-12-20", 19, "Baked ginger cookies for the neighbours"),
    ("bake-bread", "2024-03-14", 21, "Baked a sourdough bread in the evening"),
]

# (cue, keys of the memories that answer it): written from a user's side, reference time NOW.
CUES = [
    ("where did I have dinner with Sam last week", ["sam-sushi"]),
    ("dinner with Sam yesterday", ["sam-ramen"]),
    ("dinner with Sam in November 2023", ["sam-italian"]),
    ("what did Sam and I talk about at dinner in June 2023", ["sam-thai"]),
    ("what did Sam tell me at dinner 4 months ago", ["sam-italian"]),
    ("dentist appointment in October", ["dentist-filling"]),
    ("what did the dentist do last month", ["dentist-crown"]),
    ("dentist visit in April 2023", ["dentist-clean"]),
    ("dentist since January", ["dentist-crown"]),
    ("how long was my run last Sunday", ["run-rain"]),
    ("race result in May 2023", ["run-10k"]),
    ("the run in January", ["run-newyear"]),
    ("run in the last 10 days", ["run-rain"]),
    ("what did mom talk about two days ago", ["mom-school"]),
    ("call with mom in July 2023", ["mom-knee"]),
    ("what did mom and I discuss in February", ["mom-aunt"]),
    ("the call with mom on Wednesday", ["mom-school"]),
    ("roadmap meeting this week", ["road-postpone"]),
    ("what did the team decide about the roadmap last week", ["road-hire"]),
    ("roadmap decision in August 2023", ["road-mobile"]),
    ("which book did I finish last month", ["book-demon"]),
    ("book I finished in September 2023", ["book-hail"]),
    ("what did I read in January", ["book-tomorrow"]),
    ("books I finished before 2024", ["book-overstory", "book-hail"]),
    ("what was done to the car this month", ["car-brakes"]),
    ("car maintenance in November 2023", ["car-tires"]),
    ("which movie did I watch last week", ["movie-dune"]),
    ("movie I saw in July 2023", ["movie-oppen"]),
    ("movie in October 2023", ["movie-killers"]),
    ("where did I travel in August 2023", ["trip-lisbon"]),
    ("trip last month", ["trip-ski"]),
    ("which trip did I take 5 months ago", ["trip-vienna"]),
    ("doctor results in January 2024", ["doc-blood"]),
    ("haircut in September 2023", ["hair-sep"]),
    ("haircut last year", ["hair-may", "hair-sep"]),
    ("birthday this morning", ["bday-priya"]),
    ("whose birthday did we celebrate in December", ["bday-tom"]),
    ("what happened with the house this morning", ["house-boiler"]),
    ("house repair in April 2023", ["house-paint"]),
    ("what did I bake yesterday evening", ["bake-bread"]),
]

FILLERS = [
    "Paid the electricity bill", "Walked the dog around the block", "Worked on the quarterly report",
    "Slept badly, too much coffee", "Bought coffee beans at the market", "Cleaned the kitchen",
    "Answered emails all morning", "Sam texted about the weekend", "Need to book the car inspection",
    "Mom sent photos of her garden", "Read the news about the election", "Watered the plants",
    "Lunch with colleagues at the canteen", "Fixed a bug in the invoice export", "Played chess online",
    "Took the kids to football practice", "Ordered a new phone case", "Listened to a podcast about history",
    "Went to the post office", "Did the laundry", "Code review for the search feature",
    "Tried a new recipe for lentil soup", "Rainy day, stayed inside", "Called the bank about a fee",
    "Dentist reminder email arrived", "Looked at flights for the summer", "Meditated for ten minutes",
    "Team standup ran long", "Bought a birthday card", "Car wash on the way home",
]


def build(root: Path, embedder) -> tuple[Engine, dict[str, str]]:
    engine = Engine.open(root / "vault", embedder=embedder)
    rng = random.Random(7)
    fillers = [{"content": rng.choice(FILLERS), "created_at": NOW - dt.timedelta(days=rng.uniform(0.5, 365))}
               for _ in range(250)]
    keyed = [{"content": text, "created_at": at(date, hour)} for _, date, hour, text in DIARY]
    made = engine.remember_many(keyed + fillers)
    return engine, {key: m.id for (key, *_), m in zip(DIARY, made)}


def score(engine: Engine, ids: dict[str, str], **options) -> dict[str, float]:
    hit1 = hit5 = 0
    for cue, keys in CUES:
        got = engine.recall(cue, top_k=5, reinforce=False, now=NOW, **options).ids()
        wanted = {ids[k] for k in keys}
        hit1 += bool(wanted & set(got[:1]))
        hit5 += bool(wanted & set(got))
    return {"hit@1": hit1 / len(CUES), "hit@5": hit5 / len(CUES)}


def filtered(engine: Engine, ids: dict[str, str]) -> dict[str, float]:
    hit1 = hit5 = 0
    now_us = int(NOW.timestamp() * 1e6)
    for cue, keys in CUES:
        found = understand(cue, now_us)
        window = None if found is None else (found.start, found.end)
        got = engine.recall(cue, top_k=5, reinforce=False, now=NOW, time_range=window).ids()
        wanted = {ids[k] for k in keys}
        hit1 += bool(wanted & set(got[:1]))
        hit5 += bool(wanted & set(got))
    return {"hit@1": hit1 / len(CUES), "hit@5": hit5 / len(CUES)}


def configure(engine: Engine, enabled: bool, untyped_days: float = DEFAULT_UNTYPED_DAYS) -> None:
    """The same open vault under other [recall] settings: every configuration sees the same memories."""
    recall = engine.config.recall
    engine.config = msgspec.structs.replace(engine.config, recall=msgspec.structs.replace(
        recall, untyped_recency_days=untyped_days,
        time_words=msgspec.structs.replace(recall.time_words, enabled=enabled)))


def p50_ms(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def diary_part(embedder) -> None:
    now_us = int(NOW.timestamp() * 1e6)
    unread = [cue for cue, _ in CUES if understand(cue, now_us) is None]
    print(f"diary: {len(DIARY)} keyed memories + 250 fillers over a year, {len(CUES)} cues "
          f"({len(CUES) - len(unread)} with a time phrase understood{'; not read: ' + repr(unread) if unread else ''})")
    with tempfile.TemporaryDirectory(prefix="hebbs-timewords-") as tmp:
        engine, ids = build(Path(tmp), embedder)
        configure(engine, enabled=False)
        rows = [("understanding off", score(engine, ids)), ("range as a hard filter", filtered(engine, ids))]
        configure(engine, enabled=True)
        rows.append(("on (default)", score(engine, ids)))
        for days in UNTYPED_WINDOWS:
            if days != DEFAULT_UNTYPED_DAYS:
                configure(engine, enabled=True, untyped_days=days)
                rows.append((f"on, untyped window {days:g} d", score(engine, ids)))
        configure(engine, enabled=True)
        print(f"\n{'configuration':<26} {'hit@1':>6} {'hit@5':>6}")
        for name, row in rows:
            print(f"{name:<26} {row['hit@1']:>6.3f} {row['hit@5']:>6.3f}")

        plain = ["dinner with Sam", "which movie did I watch", "roadmap meeting decisions", "dentist appointment"]
        timed = [cue for cue, _ in CUES[:8]]
        rounds = 2000
        cost_plain = p50_ms(lambda: [understand(c, now_us) for c in plain], rounds) / len(plain) * 1000
        cost_timed = p50_ms(lambda: [understand(c, now_us) for c in timed], rounds) / len(timed) * 1000
        print(f"\nunderstand(): {cost_plain:.1f} us per cue without time words, {cost_timed:.1f} us with "
              f"(p50 of {rounds} rounds; a busy machine)")
        for label, cues in (("cues without time words", plain), ("cues with time words", timed)):
            runs: dict[bool, list[float]] = {False: [], True: []}
            for _ in range(15):
                for enabled in (False, True):  # interleaved rounds: fair on a busy machine
                    configure(engine, enabled=enabled)
                    started = time.perf_counter()
                    for cue in cues:
                        engine.recall(cue, top_k=10, reinforce=False, now=NOW)
                    runs[enabled].append((time.perf_counter() - started) * 1000 / len(cues))
            off_ms, on_ms = statistics.median(runs[False]), statistics.median(runs[True])
            print(f"default recall p50, {label}: off {off_ms:.2f} ms, on {on_ms:.2f} ms "
                  f"(x{on_ms / off_ms:.2f}; a busy machine)")
        engine.close()


def locomo_part(data: Path, embedder) -> None:
    from bench.datasets import locomo
    from bench.workloads import conversations as conv_eval

    conversations = locomo.load(data)
    temporal = sum(1 for c in conversations for q in c["questions"] if q["category"] == 2)
    print(f"\nLoCoMo: {sum(len(c['questions']) for c in conversations)} questions ({temporal} temporal), "
          f"recall@10 as of each conversation's last session")
    # (name, time words on, recency window, as of the last session (else: today, as bench_locomo))
    configs = [("off", False, DEFAULT_UNTYPED_DAYS, True), ("on", True, DEFAULT_UNTYPED_DAYS, True)]
    configs += [(f"win {w:g}", True, w, True) for w in UNTYPED_WINDOWS if w != DEFAULT_UNTYPED_DAYS]
    configs += [("off/today", False, DEFAULT_UNTYPED_DAYS, False),
                ("on/today", True, DEFAULT_UNTYPED_DAYS, False),
                ("1825/today", True, 1825.0, False)]
    with tempfile.TemporaryDirectory(prefix="hebbs-timewords-locomo-") as tmp, \
            Engine.open(Path(tmp) / "vault", embedder=embedder) as engine:
        dia_of = conv_eval.build(engine, conversations)
        results = {}
        understood: list[str] = []
        for name, enabled, window, as_of_last in configs:
            configure(engine, enabled=enabled, untyped_days=window)
            per: dict[str, list[float]] = {}
            for conv in conversations:
                last = max(t["created_at"] for t in conv["turns"]) if as_of_last else None
                for q in conv["questions"]:
                    found = engine.recall(q["question"], entity_id=conv["name"], top_k=10, reinforce=False, now=last)
                    if name == "on" and found.time_understood is not None:
                        understood.append(f"{found.time_understood.text} <- {q['question']!r}")
                    got = {dia_of.get(i) for i in found.ids()}
                    value = len(set(q["evidence"]) & got) / len(q["evidence"])
                    for cat in ("overall", locomo.CATEGORIES.get(q["category"], str(q["category"]))):
                        per.setdefault(cat, []).append(value)
            results[name] = {cat: statistics.fmean(v) for cat, v in per.items()}
        print(f"recall@10; 'on' = time words on; 'win W' = on, recall.untyped_recency_days W "
              f"(LoCoMo turns are untyped; default {DEFAULT_UNTYPED_DAYS:g}); '/today' = now left at the current "
              f"time, as bench_locomo.py does (the turns are about three years old)")
        print(f"{'category':<12} " + " ".join(f"{name:>9}" for name, *_ in configs))
        for cat in ["overall"] + list(locomo.CATEGORIES.values()):
            print(f"{cat:<12} " + " ".join(f"{results[name][cat]:>9.3f}" for name, *_ in configs))
        print(f"{len(understood)} questions had a time phrase understood, e.g.:")
        for line in understood[:8]:
            print(f"  {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=shared("data/locomo-dev"))
    parser.add_argument("--skip-locomo", action="store_true")
    args = parser.parse_args()
    from hebbs.embedding.embed import get_embedder

    embedder = get_embedder()
    diary_part(embedder)
    if not args.skip_locomo:
        locomo_part(args.data, embedder)


if __name__ == "__main__":
    main()
