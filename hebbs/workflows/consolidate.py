"""Consolidation of restatements: a memory said again is merged into the one it repeats.

The test (docs/consolidation.md, measured by bench/bench_consolidation.py) needs all of:
- the same entity and kind, neither superseded, and the same context type unless the text is the very
  same (then the context is only what came with it: one memory, which keeps the type);
- near-identical meaning: cosine of the embeddings >= the model's restatement_cosine (hebbs.models.calibration:
  0.9 under MiniLM, fitted per model);
- near-identical wording: word-set Jaccard >= MIN_JACCARD, and words only added or dropped, none
  replaced, and only light words at that (function words, intensifiers, discourse markers: "As I
  said, ..." restates; "... with my dad" tells something new);
- the same guard tokens, in the same order: numbers, negations (each with the word it negates),
  quantifiers and frequency words, dates and names. "I have 2 cats" then "I have 3 cats" is a
  change, not a restatement, however close the two vectors are.

The repeat is kept as a restatement record (kind REVISION, `restatement_of` the survivor) reached by
a REVISED_FROM edge, so `history` shows it and `unconsolidate` can make it a memory again.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Iterable

import numpy as np

from hebbs.errors import InvalidInput
from hebbs.models import Calibration, calibration
from hebbs.schema import ConsolidationGain, EdgeType, Memory, MemoryKind
from hebbs.index.lexical import STOPWORDS
from hebbs.core.open_vault import OpenVault, now_us
from hebbs.store.storage import WriteSet, edge_keys, encode_vector, id_bytes, temporal_keys, vector_key

from . import decay
from .contradiction_check import ANTONYMS, stem
from .revise import get
from .synonyms import form, synonyms

MIN_JACCARD = 0.6
# A restatement adds this much importance (capped at 1): said again, it matters a little more.
IMPORTANCE_STEP = 0.05
_NEIGHBOURS = 5
# A sweep gathers every copy of a memory at once: more neighbours than one remember looks at.
_SWEEP_NEIGHBOURS = 20

_WORD = re.compile(r"[A-Za-z0-9']+")
_NUMBER_WORDS = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty hundred "
    "thousand million billion first second third fourth fifth half twice once dozen".split())
_NEGATIONS = frozenset("not no never none nothing nobody neither nor without cannot can't don't doesn't didn't "
                       "isn't aren't wasn't weren't won't wouldn't shouldn't couldn't haven't hasn't hadn't "
                       "rarely seldom hardly barely scarcely".split())
# How much or how often: "we ship on Fridays" / "we only ship on Fridays" are different facts.
_QUANTIFIERS = frozenset("always often usually sometimes occasionally almost nearly only all every each some most "
                         "few many more less least".split())
# Function words that still tell when, how often or which way: "started playing again", "before
# the meeting", "turned it off" are news.
_NOT_LIGHT = frozenset("again further once before after against until off out over under above below up down".split())
# Words whose addition or removal says nothing new: function words, intensifiers, interjections,
# and the markers of a repeat ("as I said", "like I mentioned").
_LIGHT = (STOPWORDS - _NOT_LIGHT) | frozenset(
    "really so very just actually indeed definitely truly totally quite pretty super "
    "oh wow yeah yes yep hey hi hello well okay ok um uh ah aww "
    "like said say mentioned told anyway also too still already "
    "i'm i've i'll i'd you're we're it's that's there's".split())
_MONTHS_DAYS = frozenset("january february march april may june july august september october november december "
                         "monday tuesday wednesday thursday friday saturday sunday yesterday today tomorrow".split())


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def guard_tokens(text: str) -> frozenset[str]:
    """Numbers, negations, dates and names: tokens whose change makes a different fact."""
    out: set[str] = set()
    sentence_start = True
    for match in re.finditer(r"[A-Za-z0-9']+:?|[.!?]", text):
        token = match.group()
        if token in ".!?":
            sentence_start = True
            continue
        if token.endswith(":"):  # "Maria: ..." names who speaks: a name however it is placed
            out.add(token[:-1].lower())
            continue
        low = token.lower()
        if (any(c.isdigit() for c in token) or low in _NUMBER_WORDS or low in _NEGATIONS or low.endswith("n't")
                or low in _QUANTIFIERS
                or low in _MONTHS_DAYS or (token[0].isupper() and not sentence_start and low != "i")):
            out.add(low)
        sentence_start = False
    return frozenset(out)


def jaccard(a: str, b: str) -> float:
    wa, wb = set(words(a)), set(words(b))
    return len(wa & wb) / len(wa | wb) if wa | wb else 1.0


def same_guards(a: str, b: str) -> bool:
    """The guard tokens of either text appear in both, in the same order: a number, negation or name
    added, dropped, changed or moved ("batch 1 item 12" / "batch 12 item 1") makes another fact; the
    same word capitalized differently does not."""
    guards = guard_tokens(a) | guard_tokens(b)
    return _guard_sequence(words(a), guards) == _guard_sequence(words(b), guards)


def _guard_sequence(text_words: list[str], guards: frozenset[str]) -> list[tuple[str, str]]:
    """The guard tokens in order, each negation with the word after it: "does not reinforce; used
    does" and "does reinforce; used does not" hold one "not" each, negating different things."""
    return [(w, text_words[n + 1] if n + 1 < len(text_words) and _negation(w) else "")
            for n, w in enumerate(text_words) if w in guards]


def _negation(word: str) -> bool:
    return word in _NEGATIONS or word.endswith("n't")


def no_substitution(a: str, b: str) -> bool:
    """One text's words contain the other's, and what one adds is light: words were added or dropped,
    none replaced ("the blue button" / "the red button" is a changed fact), and nothing that carries
    information was added ("watching classics" / "watching classics with my dad")."""
    wa, wb = set(words(a)), set(words(b))
    return (wa <= wb or wb <= wa) and (wa ^ wb) <= _LIGHT


def same_order(a: str, b: str) -> bool:
    """The words that carry the fact, shared by both, come in the same order: "tea over coffee" /
    "coffee over tea" swaps who is preferred. Light words and guard tokens may move ("yesterday I
    went to the park" / "I went to the park yesterday"): guards are held to their order by same_guards."""
    skip = _LIGHT | guard_tokens(a) | guard_tokens(b)
    wa, wb = words(a), words(b)
    shared = (set(wa) & set(wb)) - skip
    return list(dict.fromkeys(w for w in wa if w in shared)) == list(dict.fromkeys(w for w in wb if w in shared))


def is_restatement(new_text: str, old_text: str, cosine: float, least_cosine: float) -> bool:
    return (cosine >= least_cosine and jaccard(new_text, old_text) >= MIN_JACCARD
            and no_substitution(new_text, old_text) and same_guards(new_text, old_text)
            and same_order(new_text, old_text))


def same_text(a: str, b: str) -> bool:
    """The same words, whatever the spacing and case: one memory, whatever context came with it."""
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def restates(new: Memory, old: Memory, cosine: float, least_cosine: float) -> bool:
    """Whether new restates old. A different context type is a different memory to decay (a "fact"
    folded into an untyped copy faded in 30 days instead of 180), unless the text is the very same:
    then it is one memory, which keeps the type (merge() carries the context over)."""
    if _context_type(new) != _context_type(old) and not same_text(new.content, old.content):
        return False
    return is_restatement(new.content, old.content, cosine, least_cosine)


# Paraphrases: the same fact in other words ("the flight leaves at 07:40" / "departs at 07:40"),
# merged by the sweep only (issue 30). Set on labelled dev pairs and measured once on a held-out set
# written before the rule (bench/bench_consolidation.py --paraphrases names them; docs/consolidation.md
# has the figures). Whole-sentence cosine cannot tell a synonym from an antonym (starts/ends 0.92,
# leaves/departs 0.91), so what decides is what the two texts do not share: the same guard tokens
# and units in any order, no antonym swapped in, no change of tense, and replaced words that both
# tests below accept. The least cosine of a paraphrase, and of one that only adds words to the other
# ("is located on" / "is on"), are the model's (hebbs.models.calibration: 0.90 and 0.95 under MiniLM).
# Replaced words: how much of the closeness that masking them loses the other text's words bring back
# (the smaller of the two ways round). A synonym brings nearly all of it back; an antonym or a sibling
# (weekdays / weekends) less. Sentence cosine alone ranks them the other way as often as not.
PARAPHRASE_RESTORED = 0.80
# And the change the replaced words make to the sentence without them must point the same way in both
# (cosine of the two changes): the first rule's test, which rejects other antonyms.
PARAPHRASE_CHANGE = 0.80
# Words that say a fact no longer holds ("used to", "was"): a paraphrase never adds or drops them.
_TENSE = frozenset("used was were had former formerly previously anymore longer".split())
# Words that relate things: replacing only these changes the relation ("until 10pm" / "from 10pm",
# "within two days" / "after two days", "moved to" / "moved from").
_RELATIONS = frozenset("about above across after against along among around at before behind below beneath beside "
                       "between beyond by during except for from in inside into near of off on onto out outside over "
                       "past per since through throughout till to toward towards under until up upon with within "
                       "without far away".split())
# Words that open a phrase that may move to the front ("On Fridays, Ahmed works from home").
_FRONTABLE = frozenset("on in at every each during after before since until by from for this next last "
                       "today tomorrow yesterday tonight".split())
# Kept as said (as Hippocampus freezes rules and decisions): their wording may be the point.
FROZEN_TYPES = frozenset({"rule", "decision"})


def _units(text: str) -> set[str]:
    """The word after a number or "per": its unit ("15 minutes", "per hour"), which is as much the
    fact as the number."""
    ws = words(text)
    return {ws[n + 1] for n, w in enumerate(ws[:-1])
            if w == "per" or any(ch.isdigit() for ch in w) or w in _NUMBER_WORDS}


def _same_guard_counts(a: str, b: str) -> bool:
    """The same guard tokens and units as many times in both, in any order (a paraphrase may move
    "on Friday")."""
    guards = guard_tokens(a) | guard_tokens(b) | _units(a) | _units(b)
    count_a, count_b = Counter(w for w in words(a) if w in guards), Counter(w for w in words(b) if w in guards)
    return count_a == count_b


_ANTONYM_STEMS: dict[str, set[str]] = {}
for _word, _opposites in ANTONYMS.items():
    _ANTONYM_STEMS.setdefault(stem(_word), set()).update(stem(o) for o in _opposites)


def _swaps_an_antonym(only_a: set[str], only_b: set[str]) -> bool:
    stems_b = {stem(w) for w in only_b}
    return any(_ANTONYM_STEMS.get(stem(x), set()) & stems_b for x in only_a)


def _fronted(wa: list[str], wb: list[str]) -> bool:
    """b is a with a phrase moved from its end to its front, or back ("the library opens at 9am on
    weekdays" / "on weekdays the library opens at 9am"); a swap inside the sentence is not."""
    for x, y in ((wa, wb), (wb, wa)):
        for k in range(1, len(x)):
            if y == x[k:] + x[:k] and x[k] in _FRONTABLE:
                return True
    return False


def _masked(text: str, drop: set[str]) -> str:
    """text with each run of the dropped words replaced by one [MASK]."""
    out: list[str] = []
    for token in text.split():
        if re.sub(r"[^A-Za-z0-9']", "", token).lower() in drop:
            if not out or out[-1] != "[MASK]":
                out.append("[MASK]")
        else:
            out.append(token)
    return " ".join(out)


def _synonym_swaps(wa: list[str], wb: list[str]) -> bool:
    """b is a with words or two-word phrases replaced one for one, each by a synonym in the same
    inflection (workflows/synonyms.py): "leaves at 07:40" / "departs at 07:40", "fixed" / "repaired".
    Nothing else may differ."""
    ops = difflib.SequenceMatcher(a=wa, b=wb, autojunk=False).get_opcodes()
    swaps = [(" ".join(wa[i1:i2]), " ".join(wb[j1:j2])) for op, i1, i2, j1, j2 in ops if op != "equal"]
    if not swaps or any(op not in ("equal", "replace") for op, *_ in ops):
        return False
    return all(len(x.split()) <= 2 and len(y.split()) <= 2 and form(x.split()[0]) == form(y.split()[0])
               and not {x, y} & (STOPWORDS | _RELATIONS) and synonyms(x, y) for x, y in swaps)


def is_paraphrase(embed, a: str, b: str, cosine: float, cal: Calibration) -> bool:
    """Whether b says a's fact in other words. `embed(texts)` gives one vector per text, under the model
    `cal` was fitted for."""
    if cosine < cal.paraphrase_cosine or not _same_guard_counts(a, b):
        return False
    wa, wb = words(a), words(b)
    only_a, only_b = set(wa) - set(wb), set(wb) - set(wa)
    if (only_a | only_b) & _TENSE or _swaps_an_antonym(only_a, only_b):
        return False
    if any(x[:4] == y[:4] and x.endswith("ed") != y.endswith("ed") for x in only_a for y in only_b):
        return False  # lives / lived: the same word in another tense
    if not only_a and not only_b:  # the same words: in the same order (names too), or a phrase fronted
        return (same_guards(a, b) and same_order(a, b)) or _fronted(wa, wb)
    if not same_order(a, b):
        return False
    if _synonym_swaps(wa, wb):
        return True
    if not only_a or not only_b:
        return cosine >= cal.paraphrase_added_cosine and not (only_a | only_b) & _NOT_LIGHT
    if (only_a | only_b) <= STOPWORDS | _RELATIONS:
        return False  # only function words replaced: "open until 10pm" / "open from 10pm"
    va, vb, ma, mb = (v / np.linalg.norm(v) for v in np.asarray(
        embed([a, b, _masked(a, only_a), _masked(b, only_b)]), dtype=np.float64))
    restored = min((cosine - float(v @ m)) / (1 - float(v @ m)) if float(v @ m) < 1 else 1.0
                   for v, m in ((va, ma), (vb, mb)))
    if restored < PARAPHRASE_RESTORED:
        return False
    rest = " ".join(t for t in a.split() if re.sub(r"[^A-Za-z0-9']", "", t).lower() not in only_a)
    vr = np.asarray(embed([rest])[0], dtype=np.float64)
    change_a, change_b = va - vr / np.linalg.norm(vr), vb - vr / np.linalg.norm(vr)
    norms = np.linalg.norm(change_a) * np.linalg.norm(change_b)
    return norms > 0 and float(change_a @ change_b) / norms >= PARAPHRASE_CHANGE


def find_restated(vault: OpenVault, memory: Memory, vector: np.ndarray, exclude: Iterable[str] = ()) -> str | None:
    """The id of the existing memory that `memory` restates, or None."""
    skip = set(exclude) | {memory.id}
    least = calibration(vault.embedder.model_id).restatement_cosine

    def allowed(mid: str) -> bool:
        entry = vault.entry(mid)
        return (mid not in skip and entry is not None and entry.superseded_by is None
                and entry.kind == memory.kind and entry.entity_id == memory.entity_id)

    for mid, cosine in vault.similar(vector, _NEIGHBOURS, allowed):
        old = vault.memory(mid)
        if old is not None and restates(memory, old, cosine, least):
            return mid
    return None


def _context_type(memory: Memory) -> str | None:
    """The memory's context type as the catalog keeps it (recall/scoring.py: its decay half-life)."""
    kind = memory.context.get("type")
    return kind if isinstance(kind, str) else None


def merge(writes: WriteSet, survivor: Memory, new: Memory, stamp: int, decay_value) -> tuple[Memory, Memory]:
    """Fold `new` into `survivor`: returns (survivor updated, the restatement record). The caller commits."""
    importance = round(min(1.0, max(survivor.importance, new.importance) + IMPORTANCE_STEP), 6)
    record = Memory(
        id=new.id, content=new.content, importance=new.importance, context=new.context, entity_id=new.entity_id,
        created_at=new.created_at, updated_at=stamp, last_accessed_at=stamp, kind=MemoryKind.REVISION,
        source=new.source, superseded_by=survivor.id, revision_of=survivor.id, restatement_of=survivor.id,
        consolidation_gain=ConsolidationGain(importance=round(importance - survivor.importance, 6),
                                             accessed_before=survivor.last_accessed_at),
        author=new.author, daemon=new.daemon, agent=new.agent, session=new.session,
    )
    writes.put_memory(record)
    writes.put_edge(survivor.id, EdgeType.REVISED_FROM, record.id, 1.0, stamp)
    survivor.restatements += 1
    # What the repeat's context adds (its type, when the survivor had none) is kept; the survivor's own wins.
    survivor.context = {**new.context, **survivor.context}
    survivor.importance = importance
    survivor.access_count += 1
    survivor.last_accessed_at = stamp
    survivor.updated_at = stamp
    survivor.decay_score = decay_value(survivor, stamp)
    writes.put_memory(survivor)
    return survivor, record


def restore(writes: WriteSet, vault: OpenVault, record: Memory, vector: np.ndarray, stamp: int,
            decay_value) -> tuple[Memory, Memory | None]:
    """Undo a merge: the record becomes an EPISODE of its own again, and the survivor gives back what
    the merge added (one restatement, its importance step, the access it counted). Returns (restored, survivor)."""
    survivor = vault.memory(record.restatement_of) if record.restatement_of else None
    for key in edge_keys(record.restatement_of or "", EdgeType.REVISED_FROM, record.id):
        writes.delete("graph", key)
    restored = Memory(
        id=record.id, content=record.content, importance=record.importance, context=record.context,
        entity_id=record.entity_id, created_at=record.created_at, updated_at=stamp, last_accessed_at=stamp,
        kind=MemoryKind.EPISODE, source=record.source, decay_score=record.importance,
        author=record.author, daemon=record.daemon, agent=record.agent, session=record.session,
    )
    writes.put_memory(restored)
    for key in temporal_keys(restored.entity_id, restored.created_at, restored.id):
        writes.put("temporal", key, id_bytes(restored.id))
    writes.put("vectors", vector_key(restored.id), encode_vector(vector))
    if survivor is not None:
        survivor.restatements = max(0, survivor.restatements - 1)
        gain = record.consolidation_gain
        if gain is not None:
            # Taken back as a difference: a revision of the importance since then is kept.
            survivor.importance = round(min(1.0, max(0.0, survivor.importance - gain.importance)), 6)
            survivor.access_count = max(0, survivor.access_count - 1)
            if survivor.last_accessed_at == record.updated_at:  # not used since the merge
                survivor.last_accessed_at = gain.accessed_before
        survivor.updated_at = stamp
        survivor.decay_score = decay_value(survivor, stamp)
        writes.put_memory(survivor)
    return restored, survivor


def sweep_pairs(vault: OpenVault) -> list[tuple[str, str]]:
    """(restatement, survivor) pairs over the whole vault: every restatement or paraphrase of a memory
    folded into the oldest memory it repeats, in one run.

    Oldest first, each memory not folded yet collects the newer memories that restate it. A survivor
    is never folded itself, so no record points at another record (a run that paired memories two by
    two needed several runs for five copies and left records nested). A note's section is never
    folded away: its file would bring it back at the next index."""
    folded: set[str] = set()
    pairs: list[tuple[str, str]] = []
    least = calibration(vault.embedder.model_id).restatement_cosine
    live = sorted(((mid, e) for mid, e in vault.entries()
                   if e.kind != MemoryKind.REVISION and e.superseded_by is None), key=lambda x: (x[1].created_at, x[0]))
    for mid, entry in live:
        if mid in folded:
            continue
        memory, vector = vault.memory(mid), vault.vector(mid)
        if memory is None or vector is None:
            continue

        def newer_peer(other: str, survivor: str = mid, since: int = entry.created_at) -> bool:
            found = vault.entry(other)
            return (other != survivor and other not in folded and found is not None and found.file is None
                    and found.superseded_by is None and found.kind == memory.kind
                    and found.entity_id == memory.entity_id
                    and (found.created_at, other) > (since, survivor))

        for other, cosine in vault.similar(vector, _SWEEP_NEIGHBOURS, newer_peer):
            restatement = vault.memory(other)
            if restatement is not None and (restates(restatement, memory, cosine, least)
                                            or _paraphrases(vault, restatement, memory, cosine)):
                pairs.append((other, mid))
                folded.add(other)
    return pairs


def _paraphrases(vault: OpenVault, new: Memory, old: Memory, cosine: float) -> bool:
    kind = _context_type(old)
    return (kind == _context_type(new) and kind not in FROZEN_TYPES
            and is_paraphrase(vault.embedder.embed_documents, old.content, new.content, cosine,
                              calibration(vault.embedder.model_id)))


def sweep(vault: OpenVault, *, dry_run: bool = False) -> list[tuple[str, str]]:
    """Merge every restatement already in the vault into the older memory it repeats, in one batch.
    Returns (restatement id, surviving id) pairs; dry_run lists them and changes nothing."""
    with vault.writing():
        pairs = sweep_pairs(vault)
        if dry_run or not pairs:
            return pairs
        writes = WriteSet()
        stamp = now_us()
        saved: list[Memory] = []
        survivors: dict[str, Memory] = {}  # one object per survivor: several restatements add up on it
        for new_id, old_id in pairs:
            survivor = survivors.setdefault(old_id, vault.get(old_id))
            survivor, record = merge(writes, survivor, vault.get(new_id), stamp,
                                     lambda m, t: decay.decay_value(m, t, vault.config.decay))
            for key in temporal_keys(record.entity_id, record.created_at, record.id):
                writes.delete("temporal", key)
            writes.delete("vectors", vector_key(record.id))
            saved.append(record)
        saved += survivors.values()
        # `removed` takes the restatements out of both indexes; `saved` then puts their records back in the catalog.
        vault.apply(writes, saved=saved, removed=[new_id for new_id, _ in pairs])
        return pairs


def unconsolidate(vault: OpenVault, record_id: str) -> Memory:
    """Undo a consolidation: the restatement record `record_id` (see history) becomes a memory of its own."""
    record = get(vault, record_id)
    if record.restatement_of is None:
        raise InvalidInput(f"memory {record_id} is not a restatement record (look for one in `history`)")
    vector = vault.embedder.embed([record.content])[0]
    with vault.writing():
        writes = WriteSet()
        restored, survivor = restore(writes, vault, record, vector, now_us(),
                                     lambda m, t: decay.decay_value(m, t, vault.config.decay))
        vault.apply(writes, saved=[restored] + ([survivor] if survivor else []),
                    vectors=([restored.id], vector.reshape(1, -1)), reindexed=[restored])
        return restored
