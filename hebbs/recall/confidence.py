"""Confidence and abstention: how likely each recalled memory is relevant to the cue, and whether
anything relevant was found at all.

The composite score mixes relevance with recency, importance and reinforcement: it orders results,
but 0.50 means nothing on its own (an unrelated cue still gets a top result, just a worse one).
Confidence is a separate number in 0..1, a small logistic calibration over signals that mean the
same thing in every vault:

    cosine         cue-memory cosine similarity under the embedding model
    cosine_gap     that cosine minus the cue's background, its cosine to the mean of the vault's
                   vectors (background.py: its mean cosine to any memory of the vault, estimated
                   once, no search): how far the memory stands out for this cue
    term_coverage  the weighted share of the cue's terms that the memory contains (BM25's evidence,
                   normalized for the cue so that it has a fixed scale); a term weighs its idf times
                   the generality of its word (GENERIC_RANK below: "work" in "how should retries
                   work" weighs a tenth of "ceo" in "who is Acme's CEO")
    known_terms    the IDF-weighted share of the cue's terms found anywhere in the vault: a cue about
                   names and things the vault has never seen is about something it does not know
    missing_key    the idf of the rarest cue term the memory lacks, over the idf of the rarest cue
                   term: 1 when the memory misses the cue's most specific word ("install X with
                   Homebrew" answered by a section about installing Y with Homebrew), 0 when it has it
    best_gap       the cosine minus the best cosine among the candidates the recall considered
    coverage_gap   the term coverage minus the best coverage among them: a memory that shares the
                   cue's topic but not what it asks is a weak answer beside one that has it
    in_time        1 when the cue names a time and the memory is from it: its date is not in its
                   words, and a memory from the day a question names is likelier its answer

Each candidate's confidence is its own, judged beside every candidate the recall considered (the
CONSIDERED best by fused relevance, and those returned), so top_k does not change it; the answer's
confidence, and whether it abstains, are the results' (a cue does not pass on a candidate nobody is
shown), and when a better candidate is one top_k leaves out, the answer says so.

A time phrase of the cue ("on 9 November, 2022", "last week") is not matched against the memories'
text: recall reads it as a time range (timewords.py) and a memory's date is not in its words, so
its terms are left out of the term features (with them, every dated question about a conversation
looked like a cue about words the vault never saw).

A cue that asks only for a time ("what happened yesterday": every word left is generic) is
answered by what is from then: a candidate inside the time it names holds all its terms.

The coefficients were fitted by `bench/bench_abstention.py --fit` on LoCoMo conversations 26, 30,
41 and the even-numbered notes cues, per candidate (an evidence turn or a section of the answering note
is relevant, every other candidate and every candidate of an unanswerable cue is not), and checked on the rest (docs/honesty.md has the figures). A recall
whose best confidence is below the threshold (config recall.abstain_threshold) is marked
`abstained`: nothing relevant is known for the cue; the weak candidates are still listed.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Container, Mapping, Sequence
from typing import NamedTuple

from ..config import DEFAULT_ABSTAIN_THRESHOLD
from ..index.lexical import tokenize
from .timewords import understand

FEATURES = ("cosine", "cosine_gap", "term_coverage", "known_terms", "missing_key", "best_gap", "coverage_gap",
            "in_time")
# Fitted by bench/bench_abstention.py --fit (docs/honesty.md); in the order of FEATURES.
COEFFICIENTS = (2.0, 0.8607, 1.3809, 1.6909, -0.7889, 0.3025, 0.7692, 0.4049)
INTERCEPT = -2.5297
# Chosen on the fit part: the highest threshold that abstains on at most 4% of its answerable cues.
DEFAULT_THRESHOLD = DEFAULT_ABSTAIN_THRESHOLD
NOTE = "no good match: nothing relevant known for this cue"
# Term weights are computed as if the vault held at least this many memories: in a vault of a
# handful, every word it lacks would otherwise outweigh every word it has ("what does Dana drink"
# against "Dana prefers green tea" would abstain for want of the word "drink").
REFERENCE_DOCS = 1000
# A cue word's generality, from its rank in the embedding model's vocabulary (Embedder.word_ranks):
# a word among the GENERIC_RANK most common ones says little of what is asked ("how should retries
# work", "retry policy", "what happened"), one past SPECIFIC_RANK (or not a word of the vocabulary:
# names, jargon) is specific ("Acme's CEO"). Its weight in the term features is its idf times its
# generality, which goes from GENERIC_WEIGHT to 1 in log(rank) between the two.
GENERIC_RANK = 500
SPECIFIC_RANK = 5000
GENERIC_WEIGHT = 0.1
# A cue whose every word left (its time phrase aside) is this generic asks for what was then
# ("what happened yesterday"): a memory from the time it names holds all it asks.
TIME_ONLY_GENERALITY = 0.5


# A cue that names what the vault knows and asks for something no memory holds ("Who is Acme's CEO?"
# over a vault of Acme facts, none with "CEO") matched a memory about Acme well enough on the rest of
# its words (0.38 against the threshold of 0.22): the memory matches what the cue names, not what it
# asks. So a candidate that would answer is asked whether it answers (answer_check, run by
# pipeline.judge_confidence) when the cue holds words that no memory of the vault holds (its unseen
# words: any word past the language's most common ones, generality UNSEEN_GENERALITY: "founded" and
# "phone" as much as "CEO", not "written" in "how should tests be written"). It does not answer when
# - every word the cue writes as a name is unseen ("Melanie" over another conversation): the cue is
#   about strangers;
# - the unseen words move the cue away from it beyond UNSEEN_MARGIN: the cue's cosine to it against
#   the cosine of the cue without those words. A word the memory covers in meaning moves the cue
#   toward it ("What does Dana drink?" to "Dana prefers green tea": +0.12); a word it does not cover
#   moves the cue away ("CEO" from "Acme has 250 employees": -0.07).
# A candidate that holds none of the cue's terms that set it apart from the other candidates
# (asks_more_than_the_entity: it shares the thing the cue names and nothing of what it asks; one that
# holds such a term, "pytest ... tests" for "which testing library does the user like", speaks to
# what is asked) is held closer: it does not answer either when an unseen word is written as a name
# ("Portugal"), when the cue asks for a quantity (QUANTITY: "how many", "phone number") and it holds
# no number, or when the unseen words move the cue away from it beyond its margin (UNSEEN_NAMED_MARGIN
# when the rest of the cue names one thing, below).
# Its confidence is then at most UNSEEN_CAP, under the default threshold. The margins were set so that
# false abstentions on bench_abstention.py's cues do not rise (3.2% on its fit part, 2.6% -> 2.8% on
# its report part; docs/honesty.md). The check costs one embedding of the shortened cue, only for a
# recall that would answer and has such a word.
UNSEEN_GENERALITY = 0.15
# The generality from which a word of the cue's rest counts as naming a thing (below).
NAMED_GENERALITY = 0.5
UNSEEN_MARGIN = 0.05
UNSEEN_CAP = 0.2
ENTITY_SHARE = 0.5
# A cue whose rest names one thing at most (no more than one specific word once the unseen ones are
# out: "Who is Acme's CEO?" is "Who is Acme's" and "CEO") asks only for that thing's attribute, and
# every memory about the thing matches the rest alike: the rest says nothing of which one answers,
# and only the unseen word can. There a candidate must not be moved away by it at all, beyond
# UNSEEN_NAMED_MARGIN of rounding: "CEO" moves the cue away from "Acme is on the Enterprise plan"
# by 0.025, under UNSEEN_MARGIN, and that memory kept 0.37 and the recall answered. Not 0: rounding
# alone would then make answerable cues abstain (bench_abstention.py's report part; docs/honesty.md).
UNSEEN_NAMED_MARGIN = 0.01
# A longer cue is a paragraph that asks several things: one word of it that no memory holds says
# little of whether it is answered, and embedding the rest of it would cost as much as the cue did
# (every cue of bench_abstention.py has at most 15 terms; CISI's queries have 20 at the median).
UNSEEN_MAX_TERMS = 16
# A cue that asks for a count, an amount, an age or a number is answered by a memory that holds one.
QUANTITY = re.compile(r"\b(?:how\s+(?:many|much|old)|(?:phone|fax|account|order|invoice|serial)\s+numbers?|"
                      r"what\s+number|how\s+large|how\s+big)\b", re.I)
# "How many employees does Acme have?" counts things: a count is written before what it counts ("250
# people", "3 cats", "twice"), and a number that ends a phrase is a value of another kind ("pays
# invoices net 30", "is on Postgres 15"), as is one that ends a name ("the eu-west-1 region", "v2 API").
# For "how much", "how old" and numbers asked for, any number.
COUNT_CUE = re.compile(r"\bhow\s+many\b", re.I)
NUMBER = re.compile(r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
                    r"fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|"
                    r"ninety|hundreds?|thousands?|millions?|billions?|dozens?|couple|several|single|twice|"
                    r"once|half)\b", re.I)

COUNTED = re.compile(r"(?:(?<![\w-])\d[\d,.]*|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
                     r"thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|"
                     r"sixty|seventy|eighty|ninety|hundreds?|thousands?|millions?|billions?|dozens?|several|"
                     r"couple|single)\b)\s+(?:of\s+)?[A-Za-z]|\b(?:once|twice|thrice)\b", re.I)


# "When was Umbrella founded?" asks for a time: a memory that shares only what the cue names answers it
# when it says when ("in 1999", "last week", "every March"), or when it is from the time the cue names.
WHEN_CUE = re.compile(r"^\W*when\b|\b(?:what|which)\s+(?:year|date|day|month|time)\b", re.I)
TIME_WORD = re.compile(r"\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|(?-i:May)|june?|july?|aug(?:ust)?|"
                       r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|mondays?|tuesdays?|wednesdays?|"
                       r"thursdays?|fridays?|saturdays?|sundays?|weekends?|spring|summer|autumn|fall|winter|quarter|"
                       r"yesterday|today|tonight|tomorrow|ago|since|until|recently|daily|weekly|monthly|yearly|"
                       r"annually|(?:19|20)\d\d|\d{1,2}[:/.]\d{2})\b", re.I)


# "Where did Kenji go to university?" asks for a place: "lives in Sapporo", "at the beach", "is where
# ..." say where; "works as a teacher" does not.
WHERE_CUE = re.compile(r"^\W*where\b|\b(?:which|what)\s+(?:city|country|town|place|state|region)\b", re.I)
PLACE = re.compile(r"\b(?i:in|at|near|from|to|into|around|across|outside|inside|by|on)\s+(?:(?i:the|a|an|my|our|his|"
                   r"her|their|this|that)\s+\w+|[A-Z][\w'-]+)|\b(?i:where|here|there|abroad|home)\b")


# "What is Dana's email address?" and "What is Globex's website?" ask for a value written in a form of its
# own: a memory answers them when it holds one ("dana@example.com", "globex.com"); "Dana lives in Lisbon"
# does not, however close its meaning ("address"). Only a question ("what", "which") asks for it, and for an
# address only one that ends on it: "What did Dana email me about?" and "Which website does Dana read?"
# ask for no address.
FORM_QUESTION = re.compile(r"^\W*(?:what|which)\b", re.I)
FORMS: dict[str, tuple[re.Pattern[str], re.Pattern[str]]] = {
    "an email address": (re.compile(r"\be-?mail(?:\s+address)?\W*$", re.I),
                         re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")),
    "a web address": (re.compile(r"\b(?:web\s*site|home\s*page|url|web\s+address|domain\s+name)\W*$", re.I),
                      re.compile(r"https?://|\bwww\.|\b[a-z0-9-]+\.(?:com|org|net|io|dev|app|ai|co|edu|gov|[a-z]{2})\b|"
                                 r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?|\blocalhost\b", re.I)),
    # "What was Acme's revenue last year?" over "Acme pays invoices net 30": any number would do for a
    # quantity, but a sum of money is written with its currency or its scale. Not "cost" or "budget":
    # in a project's notes they are as often time and memory ("what does a recall cost").
    "an amount of money": (re.compile(r"\b(?:revenue|turnover|price|salary|income|profit|fee|rent|valuation)s?\b",
                                      re.I),
                           re.compile(r"[$€£¥]\s?\d|\d\s?(?:[kmb]n?|million|billion|thousand)?\s?(?:usd|eur|gbp|chf|"
                                      r"jpy|dollars?|euros?|pounds?|yen)\b|\d\s?(?:million|billion|bn)\b", re.I)),
}


def form_asked(cue: str) -> str | None:
    """The form of value the cue asks for (a key of FORMS), or None."""
    if FORM_QUESTION.search(cue) is None:
        return None
    return next((name for name, (asked, _) in FORMS.items() if asked.search(cue)), None)


def holds_form(text: str, form: str) -> bool:
    """Whether a memory's text holds a value of the form FORMS names."""
    return FORMS[form][1].search(text) is not None


def holds_place(text: str) -> bool:
    """Whether a memory's text says where: a place after a preposition of place, or "where"."""
    return PLACE.search(text) is not None


def holds_time(text: str) -> bool:
    """Whether a memory's text says when: a time phrase recall would read in a cue, or a time word."""
    return TIME_WORD.search(text) is not None or understand(text, _TIME_REFERENCE_US) is not None


# "How old is Priya?" asks for an age: "is 34", "3 years old", "born in 1990"; "has two rabbits" counts
# something else.
AGE_CUE = re.compile(r"\bhow\s+old\b", re.I)
_NUMERAL = (r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
            r"sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)")
AGED = re.compile(rf"\b{_NUMERAL}[\s-]*(?:years?|yrs?|months?|weeks?)\b|\b(?:aged?|is|turned|turns|turning)\s+"
                  rf"{_NUMERAL}\b|\bborn\b", re.I)


def holds_quantity(text: str, count: bool, age: bool = False) -> bool:
    """Whether a memory's text holds what a quantity cue asks for: an age (AGE_CUE), a count
    (COUNT_CUE) or any number."""
    return (AGED if age else COUNTED if count else NUMBER).search(text) is not None


# Any fixed moment will do: only which words form the time phrase matters here, not its range.
_TIME_REFERENCE_US = 1_700_000_000_000_000
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
# A cue word's tokens (and the word its generality is read from), by how the cue wrote it: words
# repeat from cue to cue (a paragraph's "the", "of", "data"), and tokenizing each again was most of
# what a long cue's term features cost.
_CHUNKS_MAX = 50_000


@functools.lru_cache(maxsize=_CHUNKS_MAX)
def _chunk_reading(chunk: str) -> tuple[str | None, list[str]]:
    """A cue word as written: the word its generality is read from (None: not a word) and its tokens."""
    word = chunk.strip(".,;:!?()[]{}\"'`").lower()
    if word.endswith("'s"):
        word = word[:-2]
    return word if _WORD.fullmatch(word) else None, tokenize(chunk)


def cue_terms(cue: str) -> list[str]:
    """The cue's index terms, less those of its time phrase (read as a range, not matched as words)."""
    return list(cue_term_generality(cue, {}))


def cue_term_generality(cue: str, ranks: Mapping[str, int]) -> dict[str, float]:
    """The cue's index terms (less its time phrase's) and the generality of the word each came from
    (1 for every term without `ranks`)."""
    return _cue_terms(cue, ranks)[0]


def _cue_terms(cue: str, ranks: Mapping[str, int]) -> tuple[dict[str, float], list[tuple[str, list[str]]]]:
    """cue_term_generality's terms, and each word of the cue (as written) with its index terms."""
    terms: dict[str, float] = {}
    chunks = []
    for chunk in cue.split():
        word, tokens = _chunk_reading(chunk)
        weight = generality(word, ranks) if word is not None else 1.0
        chunks.append((chunk, tokens))
        for term in tokens:
            terms[term] = max(terms.get(term, 0.0), weight)
    if not terms:
        terms = {t: 1.0 for t in tokenize(cue)}
    when = understand(cue, _TIME_REFERENCE_US)
    if when is None:
        return terms, chunks
    timed = set(tokenize(when.phrase))
    return {t: w for t, w in terms.items() if t not in timed} or terms, chunks


def generality(word: str, ranks: Mapping[str, int]) -> float:
    """GENERIC_WEIGHT for a common word, 1 for a rare one or one the vocabulary lacks (see above)."""
    rank = ranks.get(word)
    if rank is None:
        return 1.0
    t = (math.log(max(rank, 1)) - _LOG_GENERIC) / _LOG_SPAN
    return min(1.0, max(GENERIC_WEIGHT, GENERIC_WEIGHT + t * (1.0 - GENERIC_WEIGHT)))


_LOG_GENERIC = math.log(GENERIC_RANK)
_LOG_SPAN = math.log(SPECIFIC_RANK) - _LOG_GENERIC


def idf(doc_freq: int, docs: int) -> float:
    """BM25's idf over at least REFERENCE_DOCS documents; a term no document holds weighs the most."""
    docs = max(docs, REFERENCE_DOCS, doc_freq)
    return math.log(1.0 + (docs - doc_freq + 0.5) / (doc_freq + 0.5))


def calibrated(values: Mapping[str, float], coefficients: Sequence[float] = COEFFICIENTS,
               intercept: float = INTERCEPT) -> float:
    return _logistic(intercept + sum(c * values[name] for c, name in zip(coefficients, FEATURES)))


def _logistic(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


class Judgement(NamedTuple):
    """Every candidate's confidence, and the features it was computed from (one row per candidate,
    in the order of FEATURES)."""
    confidences: list[float]
    values: list[list[float]]
    # The cue's specific words that no memory holds, as written (pipeline.judge_confidence asks whether
    # they bring the cue closer to a candidate: UNSEEN_MARGIN); empty when nothing would be left without them.
    unseen: list[str]
    # The cue's terms each candidate holds (asks_more_than_the_entity), and those some memory holds.
    covered: list[frozenset[str]]
    seen_terms: frozenset[str]
    # What was read from the cue alone: its rest without the unseen words, their margin, the names among
    # them, and the kind of value it asks for (answer_check, holds_the_kind_asked).
    reading: "CueReading"

    def features(self, i: int) -> dict[str, float]:
        """Candidate i's features by name, to 6 decimals (rounded for the results shown only)."""
        return {name: round(value, 6) for name, value in zip(FEATURES, self.values[i])}


class CueReading(NamedTuple):
    """What confidence reads from the cue and the vault's word counts alone, before any candidate:
    read once per recall (pipeline.run reads it before the cue is embedded, to know whether the cue
    less its unseen words will be embedded too)."""
    weighted: dict[str, float]  # the cue's terms (less its time phrase's) and their generality
    chunks: list[tuple[str, list[str]]]  # each word of the cue as written, with its index terms
    freqs: dict[str, int]  # the vault's document frequency of each term
    unseen: list[str]  # the cue's specific words that no memory holds (see UNSEEN_MARGIN), as written
    rest: str  # the cue without them
    margin: float
    names: list[str]  # those of them written as names ("Portugal"): things the vault never saw
    strangers: bool  # every word of the cue written as a name is one of those
    quantity: bool  # the cue asks for a count, an amount or a number (QUANTITY)
    count: bool  # a count (COUNT_CUE)
    when: bool  # the cue asks for a time (WHEN_CUE)
    age: bool  # an age (AGE_CUE)
    where: bool  # a place (WHERE_CUE)
    form: str | None  # a value of a form of its own (FORMS)

    @property
    def rest_to_embed(self) -> str | None:
        """The text judge_confidence embeds when a candidate would answer: the cue less its unseen
        words, or None when it has none (or nothing is left without them)."""
        return self.rest if self.unseen and self.rest.strip(_PUNCTUATION + " ") else None


_PUNCTUATION = ".,;:!?()[]{}\"'`"


def read_cue(cue: str, word_ranks: Mapping[str, int] | None, doc_freq: Callable[[list[str]], dict[str, int]]
             ) -> CueReading:
    """The cue's terms, their counts in the vault and its unseen words (assess's first step)."""
    weighted, chunks = _cue_terms(cue, word_ranks or {})
    names = list(weighted)
    freqs = doc_freq(names) if names else {}
    unseen = [chunk for chunk, tokens in chunks if tokens and all(
        weighted.get(t, 0.0) >= UNSEEN_GENERALITY and freqs.get(t, 0) == 0 for t in tokens)
              ] if len(names) <= UNSEEN_MAX_TERMS else []
    rest = " ".join(chunk for chunk, _ in chunks if chunk not in unseen) if unseen else ""
    left = {t for chunk, tokens in chunks if chunk not in unseen for t in tokens}
    named = sum(1 for t in left if weighted.get(t, 0.0) >= NAMED_GENERALITY)
    margin = UNSEEN_NAMED_MARGIN if named <= 1 else UNSEEN_MARGIN
    return CueReading(weighted, chunks, freqs, unseen, rest, margin, *_written_as_names(chunks, unseen),
                      QUANTITY.search(cue) is not None, COUNT_CUE.search(cue) is not None,
                      WHEN_CUE.search(cue) is not None, AGE_CUE.search(cue) is not None,
                      WHERE_CUE.search(cue) is not None, form_asked(cue))


def asks_more_than_the_entity(covered: Sequence[frozenset[str]], i: int) -> bool:
    """Whether candidate i holds a cue term that sets it apart: one held by at most ENTITY_SHARE of the
    candidates that hold any cue term. The terms most of them hold name what the cue is about ("Acme",
    "billing service", "the user"); one that few hold is what it asks ("test" in "which testing library
    does the user like", held by the pytest preference alone). When it is the only one that holds any,
    nothing tells the thing from what is asked: a candidate that holds two of the cue's terms holds more
    than a name."""
    holders = [terms for terms in covered if terms]
    if len(holders) == 1:
        return len(covered[i]) > 1
    return any(sum(1 for terms in holders if term in terms) <= ENTITY_SHARE * len(holders) for term in covered[i])


def _written_as_names(chunks: list[tuple[str, list[str]]], unseen: list[str]) -> tuple[list[str], bool]:
    """The unseen words written as a name: capitalized, not all capitals ("CEO", "API" are asked about
    as things of a kind), and not the first word of a sentence (capitalized by grammar alone); and
    whether every word of the cue written as a name is unseen (the cue is about strangers only)."""
    names, known = [], False
    for n, (chunk, tokens) in enumerate(chunks):
        word = chunk.strip(_PUNCTUATION)
        if not tokens or n == 0 or chunks[n - 1][0].rstrip("\"')").endswith((".", "?", "!", ":")):
            continue
        if word[:1].isupper() and any(c.islower() for c in word[1:]):
            if chunk in unseen:
                names.append(word)
            else:
                known = True
    return names, bool(names) and not known


def answer_check(judged: "Judgement", i: int, text: str, toward: Callable[[], float]) -> bool:
    """Whether candidate i, which would answer, does (see UNSEEN_GENERALITY above): `text` is its
    text, `toward` how far the cue's unseen words bring the cue to it (asked only when needed)."""
    if not judged.unseen or judged.values[i][FEATURES.index("in_time")] > 0:
        return True  # from the time the cue names: it shares that with the cue too, not only a name
    if judged.reading.strangers:
        return False  # every name the cue gives is one the vault never saw: it is about someone else
    if asks_more_than_the_entity(judged.covered, i):
        # It holds some of what is asked: the unseen words may still not move the cue away from it
        # beyond the general margin, unless it holds all the rest, two specific terms or more
        # ("add retries to the upload client": "add" said nothing the memory lacks).
        if holds_all_it_asks(judged, i):
            return True
        return toward() >= -UNSEEN_MARGIN
    asked = judged.reading
    if asked.names or (asked.quantity and not holds_quantity(text, asked.count, asked.age)):
        return False
    if asked.where and holds_place(text):
        return True
    return toward() >= -asked.margin


def holds_all_it_asks(judged: "Judgement", i: int) -> bool:
    """Whether candidate i holds every cue term some memory holds, two specific ones or more: it is
    about just what the cue asks."""
    return judged.covered[i] >= judged.seen_terms and sum(
        1 for t in judged.covered[i] if judged.reading.weighted.get(t, 0.0) >= NAMED_GENERALITY) >= 2


def holds_the_kind_asked(judged: "Judgement", i: int, text: str) -> bool:
    """Whether candidate i may answer a cue that asks for a quantity, a time, a place or a value of a form
    of its own: it holds one (a number, a count for "how many", an age for "how old", a time, a place, an
    email or web address, a sum of money), it is from the time the cue names, it holds a cue term that
    sets it apart (asks_more_than_the_entity), or it holds every term of the cue (holds_all_it_asks:
    "Which CRM does Acme use, and when is the contract renewed?", an earlier exchange, for "When is the
    Acme CRM contract renewed?", where every candidate holds them)."""
    if (judged.values[i][FEATURES.index("in_time")] > 0 or asks_more_than_the_entity(judged.covered, i)
            or holds_all_it_asks(judged, i)):
        return True
    asked = judged.reading
    return ((not asked.quantity or holds_quantity(text, asked.count, asked.age))
            and (not asked.when or holds_time(text)) and (not asked.where or holds_place(text))
            and (asked.form is None or holds_form(text, asked.form)))


def assess(cue: str, cosines: Sequence[float], memory_terms: Sequence[Container[str]],
           background: float, doc_freq: Callable[[list[str]], dict[str, int]], docs: int,
           word_ranks: Mapping[str, int] | None = None, in_time: Sequence[bool] | None = None,
           reading: CueReading | None = None,
           calibration: tuple[Sequence[float], float] | None = None) -> Judgement:
    """The judgement of each candidate, in order: how likely it is relevant to the cue.

    The candidates are all that the recall considered (its best CONSIDERED by fused relevance, and
    whatever it returns): `best_gap` and `coverage_gap` put each one beside the best of them (a
    memory about Acme that lacks "CRM" is a weak answer to "which CRM does Acme use" when another
    has it), and the answer's confidence is the best candidate's, whichever of them top_k shows.

    `cosines` are the cue's cosines to the candidates' vectors, `memory_terms` their index terms;
    `background` the cue's cosine to the vault's mean vector (background.vault_mean); `doc_freq`
    gives the vault's document frequency of terms, `docs` the number of documents; `word_ranks` the
    embedding model's vocabulary ranks (generality of the cue's words); `in_time`, for a cue with a
    time phrase, whether each candidate is from the time it names; `reading`: read_cue's reading of
    this cue over this vault, when the caller has it already.

    A candidate's features are built as a row, not a dict, and only the results shown get theirs
    as a dict (`Judgement.features`): the dicts were most of what confidence cost."""
    reading = read_cue(cue, word_ranks, doc_freq) if reading is None else reading
    weighted, freqs, unseen = reading.weighted, reading.freqs, reading.unseen
    names = list(weighted)
    weights = [idf(freqs.get(t, 0), docs) * weighted[t] for t in names]
    total = sum(weights)
    rarest = max(weights, default=0.0)
    known = sum(w for t, w in zip(names, weights) if freqs.get(t, 0) > 0) / total if total > 0 else 0.0
    # One pass of plain arithmetic per candidate: for the ten to twenty candidates of a recall,
    # numpy's per-call overhead cost more than the loop it would replace.
    items = list(zip(names, weights))
    time_only = in_time is not None and all(w < TIME_ONLY_GENERALITY for w in weighted.values())
    rows = []
    covered_terms = []
    for i, (cosine, terms) in enumerate(zip(cosines, memory_terms)):
        covered_terms.append(frozenset(term for term in names if term in terms))
        timed = in_time is not None and bool(in_time[i])
        if time_only and timed:
            coverage, known_terms, missing = 1.0, 1.0, 0.0
        else:
            covered, missing = 0.0, 0.0
            for term, weight in items:
                if term in terms:
                    covered += weight
                elif weight > missing:
                    missing = weight
            coverage = covered / total if total > 0 else 0.0
            known_terms = known
            missing = missing / rarest if rarest > 0 else 0.0
        rows.append([cosine, cosine - background, coverage, known_terms, missing, 0.0, 0.0, 1.0 if timed else 0.0])
    best_cosine = max((row[0] for row in rows), default=0.0)
    best_coverage = max((row[2] for row in rows), default=0.0)
    confidences = []
    # The vault's model's own (hebbs.models.calibration), else these, fitted on MiniLM's cosines.
    c, intercept = calibration if calibration is not None else (COEFFICIENTS, INTERCEPT)
    for row in rows:
        row[5] = row[0] - best_cosine
        row[6] = row[2] - best_coverage
        z = (intercept + c[0] * row[0] + c[1] * row[1] + c[2] * row[2] + c[3] * row[3] + c[4] * row[4]
             + c[5] * row[5] + c[6] * row[6] + c[7] * row[7])
        confidences.append(round(_logistic(z), 4))
    words = [chunk.strip(_PUNCTUATION) for chunk in unseen]
    return Judgement(confidences, rows, words if reading.rest_to_embed is not None else [], covered_terms,
                     frozenset(t for t in names if freqs.get(t, 0) > 0), reading)


def abstains(confidences: Sequence[float], threshold: float) -> bool:
    return not confidences or max(confidences) < threshold
